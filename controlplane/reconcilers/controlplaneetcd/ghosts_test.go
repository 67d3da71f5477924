package controlplaneetcd

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func Test_joinVerdict(t *testing.T) {
	deleting := metav1.Now()
	running := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m-cp-3"}}
	leaving := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m-cp-3", DeletionTimestamp: &deleting}}
	learner := etcd.Member{ID: 0x4, NodeName: "cp-3", IsLearner: true}
	timeout := 10 * time.Minute
	tests := []struct {
		name      string
		m         etcd.Member
		host      *clusterv1.Machine
		firstSeen time.Time
		wantGhost bool
		wantUntil time.Time
	}{
		{name: "A learner just added on a running Machine's Node waits for its join", m: learner, host: running,
			wantUntil: now.Add(timeout)},
		{name: "The wait is counted from when the learner was first seen", m: learner, host: running,
			firstSeen: now.Add(-4 * time.Minute), wantUntil: now.Add(6 * time.Minute)},
		{name: "A learner unstarted for spec.joinTimeout is left behind by a failed join", m: learner, host: running,
			firstSeen: now.Add(-timeout), wantGhost: true},
		{name: "A first sighting in the future (a clock stepped back) counts as now", m: learner, host: running,
			firstSeen: now.Add(time.Hour), wantUntil: now.Add(timeout)},
		{name: "A learner on a Node without a Machine waits too: the Node may be joining by hand", m: learner,
			wantUntil: now.Add(timeout)},
		{name: "A learner on a deleting Machine's Node is a ghost at once", m: learner, host: leaving, wantGhost: true},
		{name: "A learner on no Node is a ghost at once", m: etcd.Member{ID: 0x4, IsLearner: true}, wantGhost: true},
		{name: "A started member on a Node is no ghost", m: etcd.Member{ID: 0x4, Name: "cp-3", NodeName: "cp-3"}, host: running},
		{name: "A started member on no Node that no Machine is named for is a ghost", m: etcd.Member{ID: 0x4, Name: "cp-9"}, wantGhost: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ghost, until := joinVerdict(tt.m, tt.host, nil, tt.firstSeen, now, timeout)
			g.Expect(ghost).To(Equal(tt.wantGhost))
			g.Expect(until).To(BeTemporally("==", tt.wantUntil))
		})
	}
}

func Test_notStartedMembers(t *testing.T) {
	snap := &etcd.Snapshot{Members: []etcd.Member{{ID: 0x1, Name: "cp-0"}, {ID: 0xa2}, {ID: 0xb3}}}
	earlier := metav1.NewTime(now.Add(-time.Minute))
	t.Run("A member seen not started for the first time is recorded now, in whole seconds rounded up", func(t *testing.T) {
		g := NewWithT(t)
		got := notStartedMembers(nil, snap, now.Add(300*time.Millisecond))
		g.Expect(got).To(HaveLen(2))
		g.Expect(got[0].ID).To(Equal("a2"))
		g.Expect(got[0].FirstSeenTime.Time).To(BeTemporally("==", now.Add(time.Second)))
	})
	t.Run("A recorded member keeps its first sighting, so the clock survives a restart", func(t *testing.T) {
		g := NewWithT(t)
		got := notStartedMembers([]v1alpha1.NotStartedMemberStatus{{ID: "b3", FirstSeenTime: earlier}}, snap, now)
		g.Expect(got).To(Equal([]v1alpha1.NotStartedMemberStatus{
			{ID: "b3", FirstSeenTime: earlier}, {ID: "a2", FirstSeenTime: metav1.NewTime(now)}}))
	})
	t.Run("A member that started or is gone leaves the list", func(t *testing.T) {
		g := NewWithT(t)
		records := []v1alpha1.NotStartedMemberStatus{{ID: "1", FirstSeenTime: earlier}, {ID: "ff", FirstSeenTime: earlier}}
		got := notStartedMembers(records, snap, now)
		g.Expect(got).To(HaveLen(2))
		g.Expect(got).NotTo(ContainElement(HaveField("ID", BeElementOf("1", "ff"))))
	})
	t.Run("Nothing new gives the same list, so the status patch stays empty", func(t *testing.T) {
		g := NewWithT(t)
		first := notStartedMembers(nil, snap, now)
		g.Expect(notStartedMembers(first, snap, now.Add(time.Minute))).To(Equal(first))
	})
}

func Test_scope_reportJoinWait(t *testing.T) {
	t.Run("Progressing says which member is waited for, on which Machine, and until when", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		s.snapshot.Members[2].Name = ""
		s.cpe.Status.NotStartedMembers = []v1alpha1.NotStartedMemberStatus{{ID: "3", FirstSeenTime: metav1.NewTime(now.Add(-time.Minute))}}
		scan := s.scanGhosts()
		g.Expect(scan.ghosts).To(BeEmpty())
		s.reportJoinWait(scan.waits)
		g.Expect(s.progressing).NotTo(BeNil())
		g.Expect(s.progressing.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(s.progressing.Reason).To(Equal(v1alpha1.ProgressingWaitingForJoinReason))
		g.Expect(s.progressing.Message).To(And(ContainSubstring("3 (never started)"), ContainSubstring("Node cp-2 of Machine m-cp-2"),
			ContainSubstring(now.Add(9*time.Minute).Format(time.RFC3339))))
		g.Expect(s.requeueAfter).To(Equal(9 * time.Minute))
	})
	t.Run("A condition another phase set is kept", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		s.snapshot.Members[2].Name = ""
		blocked := &metav1.Condition{Type: v1alpha1.ProgressingCondition, Reason: v1alpha1.ProgressingRemovalBlockedReason}
		s.progressing = blocked
		s.reportJoinWait(s.scanGhosts().waits)
		g.Expect(s.progressing).To(BeIdenticalTo(blocked))
	})
}

// machinesNotYetCached is the manager's cached client for a moment after Machines were created:
// the watch events of those in hidden have not reached the cache yet.
type machinesNotYetCached struct {
	client.Client
	hidden []string
}

func (c machinesNotYetCached) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if ml, ok := list.(*clusterv1.MachineList); ok {
		ml.Items = slices.DeleteFunc(ml.Items, func(m clusterv1.Machine) bool { return slices.Contains(c.hidden, m.Name) })
	}
	return nil
}

// TestReconciler_ghostRemovalRereadsMachines plays a scale-up as KCP does it (the Machine is
// created, then its join adds a learner that has no name and whose peer URL is on no Node yet)
// against a cache that has not seen the new Machine: the learner looks like nobody's, and the
// uncached read right before the removal keeps it. Once the Machine is deleted, the learner is
// a ghost and is removed.
func TestReconciler_ghostRemovalRereadsMachines(t *testing.T) {
	g := NewWithT(t)
	e := newReconcileEnv(t, g, "ghost-lag", false)
	cpe := e.createCPE(g, "ghost-lag", v1alpha1.ModeManage)
	e.createMachine(g, "cp-0", false)
	joining := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "m-cp-1",
			Labels: map[string]string{clusterv1.ClusterNameLabel: e.cluster.Name, clusterv1.MachineControlPlaneLabel: ""}},
		Spec: clusterv1.MachineSpec{ClusterName: e.cluster.Name, Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("m-cp-1")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TestMachine", Name: "m-cp-1"}},
	}
	g.Expect(e.mgmt.direct.Create(context.Background(), joining)).To(Succeed())
	e.cached(g, joining)
	snap := healthySnapshot(1)
	learner := etcd.Member{ID: 0x99, PeerURLs: []string{"https://127.0.0.51:2380"}, IsLearner: true}
	snap.Members = append(snap.Members, learner)
	for i := range snap.Evidence {
		snap.Evidence[i].Members = snap.Members
	}
	e.backends.cluster.ObserveResponse = snap
	e.r.Client = machinesNotYetCached{Client: e.mgmt.cached, hidden: []string{joining.Name}}
	e.firstPass(g, cpe)

	for range 3 {
		e.reconcile(g, cpe)
		e.woken(g, cpe)
	}
	g.Expect(e.backends.cluster.RemovedMembers).To(BeEmpty(), "the learner of a Machine the cache has not seen yet is not removed")

	e.r.Client = e.mgmt.cached
	g.Expect(e.mgmt.direct.Delete(context.Background(), joining)).To(Succeed())
	g.Eventually(func() error {
		return e.mgmt.cached.Get(context.Background(), client.ObjectKeyFromObject(joining), &clusterv1.Machine{})
	}, time.Minute, 50*time.Millisecond).Should(Satisfy(apierrors.IsNotFound))
	e.reconcile(g, cpe)
	g.Expect(e.backends.cluster.RemovedMembers).To(ConsistOf(HaveField("ID", learner.ID)), "with the Machine gone, the learner is nobody's")
}
