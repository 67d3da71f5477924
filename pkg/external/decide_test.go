package external

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership/membershiptest"
)

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
		answers []membership.Answer
		wantIs  error
		wantMsg string
	}{
		{name: "every endpoint answered, none with a member list", answers: []membership.Answer{{Where: "a"}, {Where: "b"}},
			wantIs: etcd.ErrUnreachable, wantMsg: "no etcd member of the cluster answered with its member list"},
		{name: "no endpoint answered", answers: []membership.Answer{{Where: "a", Err: errors.New("etcd at a: unreachable")}},
			wantIs: etcd.ErrUnreachable, wantMsg: "etcd at a: unreachable"},
		{name: "a too large answer", answers: []membership.Answer{{Where: "a", Err: fmt.Errorf("%w: 2 MiB", etcd.ErrTooLarge)}},
			wantIs: etcd.ErrTooLarge, wantMsg: "within the bounds"},
		{name: "only TLS failures", answers: []membership.Answer{{Where: "a", Err: tlsErr}},
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

// Test_divergences runs the membership core's shared cases (the rules this backend and
// pkg/kubeadm once decided differently) through this backend's own observation: each member
// answers at its own client URL, and the decision and the snapshot are assembled from the answers.
func Test_divergences(t *testing.T) {
	endpoint := func(id uint64) string { return fmt.Sprintf("https://10.0.0.%d:2379", id) }
	member := func(id uint64) etcd.Member {
		return etcd.Member{ID: id, Name: fmt.Sprintf("etcd-%d", id), ClientURLs: []string{endpoint(id)}}
	}
	for _, tc := range membershiptest.Divergences() {
		t.Run(tc.Name, func(t *testing.T) {
			g := NewWithT(t)
			o, err := assemble(membershiptest.Memory(g, tc), membershiptest.Answers(tc, endpoint, member), func(string) bool { return true }, time.Now())
			if err != nil {
				membershiptest.Check(g, tc, nil, err)
				return
			}
			membershiptest.Check(g, tc, o.Snap, nil)
		})
	}
}
