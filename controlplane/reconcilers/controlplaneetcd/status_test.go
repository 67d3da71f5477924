package controlplaneetcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// testScope is a Manage-mode scope over n answering voters on Nodes cp-0.., cp-0 leading, one
// Machine per Node; the members listed in down do not answer.
func testScope(n int, down ...int) *scope {
	s := &scope{cpe: &v1alpha1.ControlPlaneEtcd{}, cluster: &clusterv1.Cluster{}, now: now}
	snap := &etcd.Snapshot{Backend: "test", ObservedAt: now, LeaderID: 1}
	for i := range n {
		node := fmt.Sprintf("cp-%d", i)
		snap.Members = append(snap.Members, etcd.Member{ID: uint64(i + 1), Name: node, NodeName: node})
		s.machines = append(s.machines, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m-" + node},
			Status: clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: node}}})
	}
	for i, m := range snap.Members {
		ev := etcd.MemberEvidence{MemberID: m.ID, NodeName: m.NodeName, Contact: etcd.ContactAnswered, ObservedAt: now,
			ClusterID: 0xc1, Members: snap.Members, LeaderID: 1}
		for _, d := range down {
			if d == i {
				ev = etcd.MemberEvidence{MemberID: m.ID, NodeName: m.NodeName, Contact: etcd.ContactUnreachable, Error: "connection refused", ObservedAt: now}
			}
		}
		snap.Evidence = append(snap.Evidence, ev)
	}
	s.snapshot = snap
	return s
}

func Test_setStatus(t *testing.T) {
	t.Run("Three healthy voters tolerate one failure and are fully available", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		// Note: as reconcile does, the pass checks the cluster ID before the status is written.
		(&Reconciler{Recorder: &eventRecorder{}}).checkClusterID(s)
		setStatus(s)
		st := s.cpe.Status
		g.Expect(st.MemberCount).To(HaveValue(BeEquivalentTo(3)))
		g.Expect(st.HealthyVoters).To(HaveValue(BeEquivalentTo(3)))
		g.Expect(st.FaultTolerance).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(st.Leader).To(Equal("cp-0"))
		g.Expect(st.ClusterID).To(Equal("c1"))
		g.Expect(st.Members[0].Role).To(Equal(v1alpha1.MemberRoleLeader))
		g.Expect(st.Members[0].MachineName).To(Equal("m-cp-0"))
		g.Expect(conditions.Get(s.cpe, v1alpha1.AvailableCondition).Reason).To(Equal(v1alpha1.AvailableQuorumHealthyReason))
		g.Expect(conditions.IsFalse(s.cpe, v1alpha1.DegradedCondition)).To(BeTrue())
		g.Expect(conditions.Get(s.cpe, v1alpha1.ProgressingCondition).Reason).To(Equal(v1alpha1.ProgressingReconciledReason))
	})
	t.Run("One member down of three keeps quorum with no margin: available and degraded", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3, 2)
		setStatus(s)
		g.Expect(s.cpe.Status.FaultTolerance).To(HaveValue(BeEquivalentTo(0)))
		g.Expect(conditions.Get(s.cpe, v1alpha1.AvailableCondition).Reason).To(Equal(v1alpha1.AvailableQuorumAvailableReason))
		degraded := conditions.Get(s.cpe, v1alpha1.DegradedCondition)
		g.Expect(degraded.Reason).To(Equal(v1alpha1.DegradedMembersUnhealthyReason))
		g.Expect(degraded.Message).To(ContainSubstring("cp-2"))
	})
	t.Run("Two members down of three lose quorum", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3, 1, 2)
		setStatus(s)
		g.Expect(conditions.IsFalse(s.cpe, v1alpha1.AvailableCondition)).To(BeTrue())
		g.Expect(conditions.Get(s.cpe, v1alpha1.DegradedCondition).Reason).To(Equal(v1alpha1.DegradedQuorumLostReason))
	})
	t.Run("NOSPACE on two members of three is not quorum lost: they still vote; available and degraded", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		for i := range s.snapshot.Evidence[:2] {
			s.snapshot.Evidence[i].Alarms = []etcd.Alarm{etcd.AlarmNoSpace}
		}
		setStatus(s)
		avail := conditions.Get(s.cpe, v1alpha1.AvailableCondition)
		g.Expect(avail.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(avail.Reason).To(Equal(v1alpha1.AvailableQuorumAvailableReason))
		g.Expect(avail.Message).To(Equal("1 of 3 voting members are healthy, and 2 of them refuse writes with a NOSPACE alarm but still vote"))
		g.Expect(s.cpe.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(s.cpe.Status.FaultTolerance).To(HaveValue(BeEquivalentTo(0)))
		g.Expect(conditions.Get(s.cpe, v1alpha1.DegradedCondition).Reason).To(Equal(v1alpha1.DegradedMembersUnhealthyReason))
		g.Expect(conditions.IsFalse(s.cpe, v1alpha1.EtcdClusterHealthyCondition)).To(BeTrue(), "the alarm still makes etcd unhealthy")
	})
	t.Run("NOSPACE on one member and another down of three: quorum kept by the alarmed one's vote", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3, 2)
		s.snapshot.Evidence[1].Alarms = []etcd.Alarm{etcd.AlarmNoSpace}
		setStatus(s)
		g.Expect(conditions.Get(s.cpe, v1alpha1.AvailableCondition).Reason).To(Equal(v1alpha1.AvailableQuorumAvailableReason))
	})
	t.Run("Every member's health unknown is not quorum lost: available and degraded are Unknown", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		for i := range s.snapshot.Evidence {
			s.snapshot.Evidence[i].ObservedAt = now.Add(-time.Hour)
		}
		setStatus(s)
		avail := conditions.Get(s.cpe, v1alpha1.AvailableCondition)
		g.Expect(avail.Status).To(Equal(metav1.ConditionUnknown))
		g.Expect(avail.Reason).To(Equal(v1alpha1.AvailableQuorumUnknownReason))
		g.Expect(avail.Message).To(Equal("0 of 3 voting members are healthy and the health of 3 is unknown; whether etcd can commit depends on them"))
		degraded := conditions.Get(s.cpe, v1alpha1.DegradedCondition)
		g.Expect(degraded.Status).To(Equal(metav1.ConditionUnknown))
		g.Expect(degraded.Reason).To(Equal(v1alpha1.DegradedQuorumUnknownReason))
	})
	t.Run("Two members down and one unknown of three lose quorum whatever the unknown one is", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3, 1, 2)
		s.snapshot.Evidence[0].ObservedAt = now.Add(-time.Hour)
		setStatus(s)
		g.Expect(conditions.Get(s.cpe, v1alpha1.AvailableCondition).Reason).To(Equal(v1alpha1.AvailableQuorumLostReason))
		g.Expect(conditions.Get(s.cpe, v1alpha1.DegradedCondition).Reason).To(Equal(v1alpha1.DegradedQuorumLostReason))
	})
	t.Run("A failed observation keeps the members but claims nothing about their health", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		setStatus(s)
		s.snapshot, s.observeErr = nil, fmt.Errorf("%w: connection refused", etcd.ErrUnreachable)
		setStatus(s)
		g.Expect(s.cpe.Status.Members).To(HaveLen(3))
		g.Expect(s.cpe.Status.Members[0].Health).To(Equal(v1alpha1.MemberUnknown))
		g.Expect(s.cpe.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(0)))
		g.Expect(conditions.Get(s.cpe, v1alpha1.EtcdClusterHealthyCondition).Reason).To(Equal(v1alpha1.EtcdClusterConnectionDownReason))
		g.Expect(conditions.Get(s.cpe, v1alpha1.AvailableCondition).Status).To(Equal(metav1.ConditionUnknown))
	})
	t.Run("Members keep the etcd member IDs of a backend that sees etcd's, in hexadecimal", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		s.snapshot.Members[2].ID, s.snapshot.Evidence[2].MemberID = 0x8e9e05c52164694d, 0x8e9e05c52164694d
		setStatus(s)
		g.Expect(s.cpe.Status.Members).To(HaveEach(HaveField("ID", Not(BeEmpty()))))
		g.Expect(s.cpe.Status.Members[2].ID).To(Equal("8e9e05c52164694d"))
	})
	t.Run("Members of a backend whose IDs are not etcd's (K3s) carry no ID, only their name and Node", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		s.snapshot.SyntheticMemberIDs, s.snapshot.LeaderID = true, 0
		setStatus(s)
		g.Expect(s.cpe.Status.Members).To(HaveLen(3))
		for _, m := range s.cpe.Status.Members {
			g.Expect(m.ID).To(BeEmpty(), "member %s", m.Name)
			g.Expect(m.Name).NotTo(BeEmpty())
			g.Expect(m.NodeName).NotTo(BeEmpty())
		}
	})
	t.Run("Computing the status again from the same facts changes nothing", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3, 2)
		setStatus(s)
		first := s.cpe.Status.DeepCopy()
		s.now = now.Add(time.Second)
		setStatus(s)
		g.Expect(s.cpe.Status).To(Equal(*first))
	})
}

// TestReconciler_newScope_observationInterval: a quiet pass comes back after the
// ControlPlaneEtcd's spec.observationInterval, or the manager's default when it has none, and
// sooner when a phase asked.
func TestReconciler_newScope_observationInterval(t *testing.T) {
	g := NewWithT(t)
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(eventScheme()).WithIndex(&v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, creation.ClusterNameOf).Build(), ObservationInterval: time.Minute}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	cpe := &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}

	s, err := r.newScope(context.Background(), cpe, cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.requeue().RequeueAfter).To(Equal(time.Minute), "the manager's default when the spec has none")

	cpe.Spec.ObservationInterval = &metav1.Duration{Duration: 5 * time.Second}
	s, err = r.newScope(context.Background(), cpe, cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.requeue().RequeueAfter).To(Equal(5*time.Second), "the spec wins")

	s.wantRequeue(time.Second)
	g.Expect(s.requeue().RequeueAfter).To(Equal(time.Second), "a phase's shorter wait wins")
}

// Test_setStatus_external: an external etcd's members run on no control-plane Machine. The
// control-plane Machines (here with Nodes named like the members) are neither matched to members
// nor held against them, and Manage is observed only, saying why.
func Test_setStatus_external(t *testing.T) {
	t.Run("External members are healthy with no Machine and are matched to no control-plane Machine", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		s.cpe.Spec.Backend = v1alpha1.BackendExternal
		setStatus(s)
		g.Expect(conditions.IsTrue(s.cpe, v1alpha1.EtcdClusterHealthyCondition)).To(BeTrue(), conditions.Get(s.cpe, v1alpha1.EtcdClusterHealthyCondition).Message)
		for _, m := range s.cpe.Status.Members {
			g.Expect(m.MachineName).To(BeEmpty(), "member %s", m.Name)
		}
		g.Expect(s.cpe.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(3)))
	})
	t.Run("A member down is still reported unhealthy", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3, 2)
		s.cpe.Spec.Backend = v1alpha1.BackendExternal
		setStatus(s)
		g.Expect(conditions.IsFalse(s.cpe, v1alpha1.EtcdClusterHealthyCondition)).To(BeTrue())
		g.Expect(s.cpe.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(2)))
		g.Expect(conditions.Get(s.cpe, v1alpha1.DegradedCondition).Message).To(ContainSubstring("cp-2"))
	})
	t.Run("Mode Manage on external etcd is observed only, and Progressing says why", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		s.cpe.Spec.Backend, s.cpe.Spec.Mode = v1alpha1.BackendExternal, v1alpha1.ModeManage
		g.Expect(s.manages()).To(BeFalse())
		setStatus(s)
		p := conditions.Get(s.cpe, v1alpha1.ProgressingCondition)
		g.Expect(p.Reason).To(Equal(v1alpha1.ProgressingModeNotSupportedReason))
		g.Expect(p.Message).To(ContainSubstring("Mode Manage is not supported for backend external"))
	})
}

func Test_setStatus_etcdadm(t *testing.T) {
	// etcdadmScope is an external etcd whose members (named after their hosts, as etcdadm names
	// them, not after the Machines) run on the EtcdadmCluster's etcd Machines, found by peer URL.
	etcdadmScope := func(addresses ...string) *scope {
		s := testScope(3)
		s.cpe.Spec.Backend = v1alpha1.BackendExternal
		s.machines = nil
		for i := range s.snapshot.Members {
			s.snapshot.Members[i].Name = fmt.Sprintf("etcd-host-%d", i)
			s.snapshot.Members[i].NodeName = ""
			s.snapshot.Members[i].PeerURLs = []string{fmt.Sprintf("https://10.0.0.%d:2380", i)}
		}
		for i, a := range addresses {
			s.etcdMachines = append(s.etcdMachines, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("etcd-m-%d", i)},
				Status: clusterv1.MachineStatus{Addresses: clusterv1.MachineAddresses{{Type: clusterv1.MachineInternalIP, Address: a}}}})
		}
		return s
	}
	t.Run("Each member is bound to the etcd Machine its peer URL's host is an address of", func(t *testing.T) {
		g := NewWithT(t)
		s := etcdadmScope("10.0.0.2", "10.0.0.0", "10.0.0.1")
		setStatus(s)
		got := map[string]string{}
		for _, m := range s.cpe.Status.Members {
			got[m.Name] = m.MachineName
		}
		g.Expect(got).To(Equal(map[string]string{"etcd-host-0": "etcd-m-1", "etcd-host-1": "etcd-m-2", "etcd-host-2": "etcd-m-0"}))
		g.Expect(conditions.IsTrue(s.cpe, v1alpha1.EtcdClusterHealthyCondition)).To(BeTrue(), conditions.Get(s.cpe, v1alpha1.EtcdClusterHealthyCondition).Message)
	})
	t.Run("A member whose host is no etcd Machine's address is bound to none", func(t *testing.T) {
		g := NewWithT(t)
		s := etcdadmScope("10.0.0.0", "10.0.0.1")
		setStatus(s)
		g.Expect(s.cpe.Status.Members[2].Name).To(Equal("etcd-host-2"))
		g.Expect(s.cpe.Status.Members[2].MachineName).To(BeEmpty())
	})
	t.Run("A member two etcd Machines claim (a reused address) is bound to neither, not guessed", func(t *testing.T) {
		g := NewWithT(t)
		s := etcdadmScope("10.0.0.0", "10.0.0.0")
		setStatus(s)
		g.Expect(s.cpe.Status.Members[0].MachineName).To(BeEmpty())
	})
	t.Run("Mode Manage on an EtcdadmCluster's etcd manages its etcd Machines, each with the member its peer URL names", func(t *testing.T) {
		g := NewWithT(t)
		s := etcdadmScope("10.0.0.2", "10.0.0.0", "10.0.0.1")
		s.etcdadm, s.cpe.Spec.Mode = true, v1alpha1.ModeManage
		g.Expect(s.manages()).To(BeTrue())
		g.Expect(s.progressing).To(BeNil())
		g.Expect(s.memberMachines()).To(Equal(s.etcdMachines))
		got := s.membersOf(s.etcdMachines[1])
		g.Expect(got).To(HaveLen(1))
		g.Expect(got[0].Name).To(Equal("etcd-host-0"))
	})
}
