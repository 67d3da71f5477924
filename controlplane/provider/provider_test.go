package provider_test

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/provider"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func TestPreflight(t *testing.T) {
	t.Run("Three healthy members that agree pass", func(t *testing.T) {
		g := NewWithT(t)
		s, machines := healthyCluster(3)
		r := provider.Preflight(provider.Observation{Snapshot: s, Machines: machines, Now: now})
		g.Expect(r.Healthy).To(BeTrue())
		g.Expect(r.Members).To(BeEmpty())
		g.Expect(r.Condition.Reason).To(Equal(v1alpha1.EtcdClusterHealthyReason))
	})
	t.Run("A member with an alarm fails and is named with its Machine", func(t *testing.T) {
		g := NewWithT(t)
		s, machines := healthyCluster(3)
		s.Evidence[1].Alarms = []etcd.Alarm{etcd.AlarmNoSpace}
		r := provider.Preflight(provider.Observation{Snapshot: s, Machines: machines, Now: now})
		g.Expect(r.Healthy).To(BeFalse())
		g.Expect(r.Members).To(HaveLen(1))
		g.Expect(r.Members[0].Machine).To(Equal("m-cp-1"))
		g.Expect(r.Members[0].Message).To(ContainSubstring("NOSPACE"))
		g.Expect(r.String()).To(ContainSubstring("cp-1"))
	})
	t.Run("A member whose member list differs from the others fails", func(t *testing.T) {
		g := NewWithT(t)
		s, machines := healthyCluster(3)
		s.Evidence[2].Members = s.Members[:2]
		r := provider.Preflight(provider.Observation{Snapshot: s, Machines: machines, Now: now})
		g.Expect(r.Healthy).To(BeFalse())
		g.Expect(r.Members).To(HaveLen(1))
		g.Expect(r.Members[0].Member.Name).To(Equal("cp-2"))
		g.Expect(r.Members[0].Message).To(ContainSubstring("differs from the majority"))
	})
	t.Run("A learner is not healthy for preflight", func(t *testing.T) {
		g := NewWithT(t)
		s, machines := healthyCluster(3)
		s.Members[2].IsLearner = true
		for i := range s.Evidence {
			s.Evidence[i].Members = s.Members
		}
		r := provider.Preflight(provider.Observation{Snapshot: s, Machines: machines, Now: now})
		g.Expect(r.Healthy).To(BeFalse())
		g.Expect(r.Members[0].Message).To(ContainSubstring("learner"))
	})
	t.Run("A failed observation fails with the connection reason", func(t *testing.T) {
		g := NewWithT(t)
		_, machines := healthyCluster(3)
		r := provider.Preflight(provider.Observation{Err: errors.Join(etcd.ErrUnreachable), Machines: machines, Now: now})
		g.Expect(r.Healthy).To(BeFalse())
		g.Expect(r.Condition.Status).To(Equal(metav1.ConditionUnknown))
		g.Expect(r.Condition.Reason).To(Equal(v1alpha1.EtcdClusterConnectionDownReason))
	})
}

func TestMayScaleDown(t *testing.T) {
	t.Run("Removing a healthy member of three healthy ones keeps quorum", func(t *testing.T) {
		g := NewWithT(t)
		s, machines := healthyCluster(3)
		v := provider.MayScaleDown(provider.Observation{Snapshot: s, Machines: machines, Now: now}, machines[0])
		g.Expect(v.Allowed).To(BeTrue(), v.Message)
	})
	t.Run("Removing a healthy member next to a broken one is refused with the numbers", func(t *testing.T) {
		g := NewWithT(t)
		s, machines := healthyCluster(3)
		breakMember(s, 2)
		v := provider.MayScaleDown(provider.Observation{Snapshot: s, Machines: machines, Now: now}, machines[0])
		g.Expect(v.Allowed).To(BeFalse())
		g.Expect(v.Reason).To(Equal(v1alpha1.MemberRemovalWouldLoseQuorumReason))
		g.Expect(v.Message).To(ContainSubstring("1 of 2 voters are healthy"))
	})
	t.Run("The last member is never removed", func(t *testing.T) {
		g := NewWithT(t)
		s, machines := healthyCluster(1)
		v := provider.MayScaleDown(provider.Observation{Snapshot: s, Machines: machines, Now: now}, machines[0])
		g.Expect(v.Reason).To(Equal(v1alpha1.MemberRemovalLastMemberReason))
	})
	t.Run("Nothing observed is never safe", func(t *testing.T) {
		g := NewWithT(t)
		_, machines := healthyCluster(3)
		v := provider.MayScaleDown(provider.Observation{Err: etcd.ErrUnreachable, Machines: machines, Now: now}, machines[0])
		g.Expect(v.Reason).To(Equal(v1alpha1.MemberRemovalHealthUnknownReason))
	})
}

func TestMayRemediate(t *testing.T) {
	t.Run("Remediating the broken member is allowed", func(t *testing.T) {
		g := NewWithT(t)
		s, machines := healthyCluster(3)
		breakMember(s, 2)
		g.Expect(provider.MayRemediate(provider.Observation{Snapshot: s, Machines: machines, Now: now}, machines[2]).Allowed).To(BeTrue())
	})
	t.Run("Remediating a healthy Machine next to a broken member is refused", func(t *testing.T) {
		g := NewWithT(t)
		s, machines := healthyCluster(3)
		breakMember(s, 2)
		g.Expect(provider.MayRemediate(provider.Observation{Snapshot: s, Machines: machines, Now: now}, machines[1]).Allowed).To(BeFalse())
	})
	t.Run("A Machine without a Node does not affect etcd", func(t *testing.T) {
		g := NewWithT(t)
		s, machines := healthyCluster(3)
		breakMember(s, 2)
		provisioning := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m-new"}}
		v := provider.MayRemediate(provider.Observation{Snapshot: s, Machines: append(machines, provisioning), Now: now}, provisioning)
		g.Expect(v.Allowed).To(BeTrue())
		g.Expect(v.Reason).To(Equal(v1alpha1.MemberRemovalNoMemberReason))
	})
}

func TestSetConditions(t *testing.T) {
	g := NewWithT(t)
	s, machines := healthyCluster(3)
	breakMember(s, 1)
	cp := &clusterv1.Cluster{} // any conditions.Setter stands in for the control-plane object
	provider.SetConditions(cp, provider.Observation{Snapshot: s, Machines: machines, Now: now})
	g.Expect(*conditions.Get(machines[0], v1alpha1.EtcdMemberHealthyCondition)).To(conditions.MatchCondition(metav1.Condition{
		Type: v1alpha1.EtcdMemberHealthyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.EtcdMemberHealthyReason,
	}, conditions.IgnoreLastTransitionTime(true)))
	got := conditions.Get(machines[1], v1alpha1.EtcdMemberHealthyCondition)
	g.Expect(got.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(got.Reason).To(Equal(v1alpha1.EtcdMemberNotHealthyReason))
	g.Expect(conditions.Get(cp, v1alpha1.EtcdClusterHealthyCondition).Reason).To(Equal(v1alpha1.EtcdClusterNotHealthyReason))
}

func TestPreflight_leavesOutTheMachinesBeingRemoved(t *testing.T) {
	tests := []struct {
		name     string
		removing int
		healthy  bool
	}{
		{"scaling down the Machine whose member is broken is allowed", 2, true},
		{"scaling down another Machine is refused while a member is broken", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s, machines := healthyCluster(3)
			breakMember(s, 2)
			r := provider.Preflight(provider.Observation{Snapshot: s, Machines: machines, Now: now}, machines[tt.removing])
			g.Expect(r.Healthy).To(Equal(tt.healthy), r.String())
			if !tt.healthy {
				g.Expect(r.Members).To(ContainElement(HaveField("Machine", "m-cp-2")))
			}
		})
	}
}
