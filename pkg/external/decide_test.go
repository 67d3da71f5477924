package external

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func TestClusterIDOf(t *testing.T) {
	tests := []struct {
		name    string
		answers []answer
		want    uint64
		wantErr error
	}{
		{name: "the cluster ID most endpoints answer with is the cluster's",
			answers: []answer{{clusterID: 1}, {clusterID: 1}, {clusterID: 2}}, want: 1},
		{name: "two cluster IDs in equal numbers are refused, not guessed",
			answers: []answer{{clusterID: 1}, {clusterID: 2}}, wantErr: etcd.ErrInvalidInput},
		{name: "a removed member's answer does not count",
			answers: []answer{{clusterID: 1}, {clusterID: 2, removed: "removed"}}, want: 1},
		{name: "no answer at all is unreachable",
			answers: []answer{{err: errors.New("connection refused")}}, wantErr: etcd.ErrUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := clusterIDOf(tt.answers)
			if tt.wantErr != nil {
				g.Expect(errors.Is(err, tt.wantErr)).To(BeTrue(), "got %v", err)
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestMemberList(t *testing.T) {
	a, b, c := etcd.Member{ID: 1}, etcd.Member{ID: 2}, etcd.Member{ID: 3}
	tests := []struct {
		name    string
		answers []answer
		want    []etcd.Member
	}{
		{name: "the leader's own list wins, it has applied every committed change",
			answers: []answer{
				{clusterID: 9, selfID: 2, leaderID: 1, members: []etcd.Member{a, b, c}},
				{clusterID: 9, selfID: 3, leaderID: 1, members: []etcd.Member{a, b, c}},
				{clusterID: 9, selfID: 1, leaderID: 1, members: []etcd.Member{a, b}},
			}, want: []etcd.Member{a, b}},
		{name: "without the leader, the list most members report",
			answers: []answer{
				{clusterID: 9, selfID: 2, leaderID: 1, members: []etcd.Member{a, b, c}},
				{clusterID: 9, selfID: 3, leaderID: 1, members: []etcd.Member{a, b, c}},
				{clusterID: 9, selfID: 4, leaderID: 1, members: []etcd.Member{a, b}},
			}, want: []etcd.Member{a, b, c}},
		{name: "another cluster's list is never taken",
			answers: []answer{{clusterID: 8, selfID: 7, leaderID: 7, members: []etcd.Member{c}}}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(memberList(tt.answers, 9)).To(Equal(tt.want))
		})
	}
}

func TestSplitStatusErrors(t *testing.T) {
	g := NewWithT(t)
	errs, alarms := splitStatusErrors([]string{"memberID:10276657743932975437 alarm:NOSPACE ", "etcdserver: no leader"})
	g.Expect(errs).To(Equal([]string{"etcdserver: no leader"}))
	g.Expect(alarms).To(Equal([]etcd.ActiveAlarm{{MemberID: 10276657743932975437, Alarm: etcd.AlarmNoSpace}}))
}

func TestCheckEndpoint(t *testing.T) {
	tests := []struct {
		name, endpoint string
		ok             bool
	}{
		{name: "an https client URL with a port is accepted", endpoint: "https://10.0.0.1:2379", ok: true},
		{name: "plain http is refused: the requests would go unverified", endpoint: "http://10.0.0.1:2379"},
		{name: "a URL without a port is refused", endpoint: "https://etcd.example.com"},
		{name: "a bare host:port is refused", endpoint: "10.0.0.1:2379"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkEndpoint(tt.endpoint)
			NewWithT(t).Expect(err == nil).To(Equal(tt.ok), "%v", err)
		})
	}
}

// TestNoAnswerError: the error of an observation no endpoint answered with a member list says
// which kind of failure it was, and never formats a missing cause.
func TestNoAnswerError(t *testing.T) {
	tlsErr := &endpointError{endpoint: "a", class: classTLSFailed, kind: etcd.ErrUnreachable}
	tests := []struct {
		name    string
		answers []answer
		wantIs  error
		wantMsg string
	}{
		{name: "every endpoint answered, none with a member list", answers: []answer{{endpoint: "a"}, {endpoint: "b"}},
			wantIs: etcd.ErrUnreachable, wantMsg: "no etcd member of the cluster answered with its member list"},
		{name: "no endpoint answered", answers: []answer{{endpoint: "a", err: errors.New("etcd at a: unreachable")}},
			wantIs: etcd.ErrUnreachable, wantMsg: "etcd at a: unreachable"},
		{name: "a too large answer", answers: []answer{{endpoint: "a", err: fmt.Errorf("%w: 2 MiB", etcd.ErrTooLarge)}},
			wantIs: etcd.ErrTooLarge, wantMsg: "within the bounds"},
		{name: "only TLS failures", answers: []answer{{endpoint: "a", err: tlsErr}},
			wantIs: etcd.ErrInvalidInput, wantMsg: "credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := noAnswerError(tt.answers)
			g.Expect(err).To(MatchError(tt.wantIs))
			g.Expect(err.Error()).To(And(ContainSubstring(tt.wantMsg), Not(ContainSubstring("%!"))))
		})
	}
}
