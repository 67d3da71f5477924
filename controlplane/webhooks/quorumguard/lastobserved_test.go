package quorumguard

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Test_assessLastObservation: when etcd cannot be observed, the guard decides on the members the
// status last recorded, counting those of the Machines going, and those whose Machine has been
// seen unhealthy (unhealthySince, which an unobserved pass keeps) or was recorded Unhealthy, as
// unhealthy; a health an unobserved pass marked Unknown counts as last seen.
func Test_assessLastObservation(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	tests := []struct {
		name          string
		status        v1alpha1.ControlPlaneEtcdStatus
		going         []string
		removedFirst  []string
		wantObserved  bool
		wantQuorum    etcd.QuorumState
		wantUnhealthy []string
	}{
		{name: "3 members last seen healthy, marked Unknown by a network blip: deleting one holds",
			status: recorded(3, v1alpha1.MemberUnknown), going: []string{"m-cp-0"},
			wantObserved: true, wantQuorum: etcd.QuorumHolds},
		{name: "2 members, deleting one whose member a hook removes first: the other is left, 1 of 1, holds",
			status: recorded(2, v1alpha1.MemberUnknown), going: []string{"m-cp-1"}, removedFirst: []string{"m-cp-1"},
			wantObserved: true, wantQuorum: etcd.QuorumHolds},
		{name: "2 members, deleting one whose member nothing removes first: it fails, 1 of 2, lost",
			status: recorded(2, v1alpha1.MemberUnknown), going: []string{"m-cp-1"},
			wantObserved: true, wantQuorum: etcd.QuorumLost},
		{name: "one member unhealthy since, deleting a healthy one a hook removes first: 1 of 2 left, lost",
			status: withUnhealthySince(recorded(3, v1alpha1.MemberUnknown), "m-cp-2", since), going: []string{"m-cp-1"}, removedFirst: []string{"m-cp-1"},
			wantObserved: true, wantQuorum: etcd.QuorumLost, wantUnhealthy: []string{"cp-2 (unhealthy since 2026-01-02T03:04:05Z)"}},
		{name: "one member unhealthy since, deleting a healthy one: lost",
			status: withUnhealthySince(recorded(3, v1alpha1.MemberUnknown), "m-cp-2", since), going: []string{"m-cp-1"},
			wantObserved: true, wantQuorum: etcd.QuorumLost, wantUnhealthy: []string{"cp-2 (unhealthy since 2026-01-02T03:04:05Z)"}},
		{name: "deleting the member unhealthy since itself: holds",
			status: withUnhealthySince(recorded(3, v1alpha1.MemberUnknown), "m-cp-2", since), going: []string{"m-cp-2"},
			wantObserved: true, wantQuorum: etcd.QuorumHolds, wantUnhealthy: []string{"cp-2 (unhealthy since 2026-01-02T03:04:05Z)"}},
		{name: "a member recorded Unhealthy by the last observed pass, deleting a healthy one: lost",
			status: withHealth(recorded(3, v1alpha1.MemberHealthy), 2, v1alpha1.MemberUnhealthy), going: []string{"m-cp-0"},
			wantObserved: true, wantQuorum: etcd.QuorumLost, wantUnhealthy: []string{"cp-2 (NotHealthy)"}},
		{name: "two concurrent deletions of healthy members of 3: lost",
			status: recorded(3, v1alpha1.MemberHealthy), going: []string{"m-cp-0", "m-cp-1"},
			wantObserved: true, wantQuorum: etcd.QuorumLost},
		{name: "never observed: nothing to decide on",
			status: v1alpha1.ControlPlaneEtcdStatus{}, going: []string{"m-cp-0"}},
		{name: "a learner does not vote: 2 voters and a learner, deleting a voter: lost",
			status: withRole(recorded(3, v1alpha1.MemberUnknown), 2, v1alpha1.MemberRoleLearner), going: []string{"m-cp-0"},
			wantObserved: true, wantQuorum: etcd.QuorumLost},
		{name: "a learner does not vote: 2 voters and a learner, deleting the learner: holds",
			status: withRole(recorded(3, v1alpha1.MemberUnknown), 2, v1alpha1.MemberRoleLearner), going: []string{"m-cp-2"},
			wantObserved: true, wantQuorum: etcd.QuorumHolds},
		{name: "5 members, one unhealthy since, deleting a healthy one: 3 of 5 holds",
			status: withUnhealthySince(recorded(5, v1alpha1.MemberUnknown), "m-cp-4", since), going: []string{"m-cp-0"},
			wantObserved: true, wantQuorum: etcd.QuorumHolds, wantUnhealthy: []string{"cp-4 (unhealthy since 2026-01-02T03:04:05Z)"}},
		{name: "5 members, two unhealthy since, deleting a healthy one: lost",
			status: withUnhealthySince(withUnhealthySince(recorded(5, v1alpha1.MemberUnknown), "m-cp-4", since), "m-cp-3", since), going: []string{"m-cp-0"},
			wantObserved: true, wantQuorum: etcd.QuorumLost,
			wantUnhealthy: []string{"cp-3 (unhealthy since 2026-01-02T03:04:05Z)", "cp-4 (unhealthy since 2026-01-02T03:04:05Z)"}},
		{name: "5 members, one deletion under way and this one, of healthy members: holds",
			status: recorded(5, v1alpha1.MemberUnknown), going: []string{"m-cp-0", "m-cp-1"},
			wantObserved: true, wantQuorum: etcd.QuorumHolds},
		{name: "5 members, two deletions under way and this one, of healthy members: lost",
			status: recorded(5, v1alpha1.MemberUnknown), going: []string{"m-cp-0", "m-cp-1", "m-cp-2"},
			wantObserved: true, wantQuorum: etcd.QuorumLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := assessLastObservation(tt.status, tt.going, tt.removedFirst)
			g.Expect(got.observed).To(Equal(tt.wantObserved))
			if !tt.wantObserved {
				return
			}
			g.Expect(got.quorum).To(Equal(tt.wantQuorum))
			g.Expect(got.unhealthy).To(Equal(tt.wantUnhealthy))
		})
	}
}

// recorded is the status of n voters cp-0.. on Machines m-cp-0.., each with health h, and an
// entry in status.machineMembers without a clock; a health other than Healthy has the reason
// an unobserved pass gives (markMembersUnknown).
func recorded(n int, h v1alpha1.MemberHealth) v1alpha1.ControlPlaneEtcdStatus {
	var st v1alpha1.ControlPlaneEtcdStatus
	for i := range n {
		node := fmt.Sprintf("cp-%d", i)
		reason := v1alpha1.EtcdMemberHealthyReason
		if h != v1alpha1.MemberHealthy {
			reason = etcd.ClusterConnectionDownReason
		}
		st.Members = append(st.Members, v1alpha1.EtcdMemberStatus{Name: node, ID: fmt.Sprintf("%x", i+1), NodeName: node,
			MachineName: "m-" + node, Role: v1alpha1.MemberRoleVoter, Health: h, Reason: reason})
		st.MachineMembers = append(st.MachineMembers, v1alpha1.MachineMemberStatus{MachineName: "m-" + node})
	}
	return st
}

func withUnhealthySince(st v1alpha1.ControlPlaneEtcdStatus, machine string, since metav1.Time) v1alpha1.ControlPlaneEtcdStatus {
	for i := range st.MachineMembers {
		if st.MachineMembers[i].MachineName == machine {
			st.MachineMembers[i].UnhealthySince = &since
		}
	}
	return st
}

func withHealth(st v1alpha1.ControlPlaneEtcdStatus, i int, h v1alpha1.MemberHealth) v1alpha1.ControlPlaneEtcdStatus {
	st.Members[i].Health, st.Members[i].Reason = h, v1alpha1.EtcdMemberNotHealthyReason
	return st
}

func withRole(st v1alpha1.ControlPlaneEtcdStatus, i int, r v1alpha1.MemberRole) v1alpha1.ControlPlaneEtcdStatus {
	st.Members[i].Role = r
	return st
}
