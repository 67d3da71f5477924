package controlplaneetcd

import (
	"cmp"
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	etcdfake "github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
)

// flowRun is one pass of the removal flow over a test scope, with what the API server held at
// the moments that matter.
type flowRun struct {
	s       *scope
	backend *recordingBackend
	client  client.Client
	// removalAtMachinePatch is status.removal as stored when a Machine was patched.
	removalAtMachinePatch []*v1alpha1.MemberRemovalStatus
}

// recordingBackend notes status.removal as stored each time RemoveMember is called.
type recordingBackend struct {
	*etcdfake.Cluster
	stored     func() *v1alpha1.MemberRemovalStatus
	atRemoveOf []*v1alpha1.MemberRemovalStatus
}

func (b *recordingBackend) RemoveMember(ctx context.Context, m etcd.Member) (etcd.Removal, error) {
	b.atRemoveOf = append(b.atRemoveOf, b.stored())
	return b.Cluster.RemoveMember(ctx, m)
}

func newFlowRun(t *testing.T, s *scope, backend *etcdfake.Cluster) *flowRun {
	t.Helper()
	s.cpe.Name, s.cpe.Namespace = "c", "ns"
	s.storedRemoval = s.cpe.Status.Removal.DeepCopy()
	run := &flowRun{s: s}
	objs := []client.Object{s.cpe}
	for _, m := range s.machines {
		m.Namespace = "ns"
		objs = append(objs, m)
	}
	stored := func() *v1alpha1.MemberRemovalStatus {
		got := &v1alpha1.ControlPlaneEtcd{}
		if err := run.client.Get(context.Background(), client.ObjectKeyFromObject(s.cpe), got); err != nil {
			t.Fatalf("failed to read the ControlPlaneEtcd: %v", err)
		}
		return got.Status.Removal
	}
	base := fake.NewClientBuilder().WithScheme(eventScheme()).WithIndex(&v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, creation.ClusterNameOf).WithObjects(objs...).WithStatusSubresource(s.cpe).Build()
	run.client = interceptor.NewClient(base, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*clusterv1.Machine); ok {
				run.removalAtMachinePatch = append(run.removalAtMachinePatch, stored())
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	run.backend = &recordingBackend{Cluster: backend, stored: stored}
	s.backend = run.backend
	return run
}

// hooked reports whether the Machine still carries the hook, as stored.
func (run *flowRun) hooked(g Gomega, m *clusterv1.Machine) bool {
	got := &clusterv1.Machine{}
	g.Expect(run.client.Get(context.Background(), client.ObjectKeyFromObject(m), got)).To(Succeed())
	return got.Annotations[v1alpha1.PreTerminateHookAnnotation] != ""
}

func (run *flowRun) reconcile(g Gomega) {
	r := &Reconciler{Client: run.client, Recorder: &eventRecorder{}}
	// As reconcile does right after observing.
	dropSyntheticMemberID(run.s)
	_, err := r.reconcileDeletingMachines(context.Background(), run.s)
	g.Expect(err).NotTo(HaveOccurred())
}

func removedIDs(b *etcdfake.Cluster) []uint64 {
	var out []uint64
	for _, m := range b.RemovedMembers {
		out = append(out, m.ID)
	}
	return out
}

func dropMember(s *scope, id uint64) {
	var members []etcd.Member
	for _, m := range s.snapshot.Members {
		if m.ID != id {
			members = append(members, m)
		}
	}
	var evidence []etcd.MemberEvidence
	for _, e := range s.snapshot.Evidence {
		if e.MemberID != id {
			evidence = append(evidence, e)
		}
	}
	s.snapshot.Members, s.snapshot.Evidence = members, evidence
}

func inProgress(member string, id, machine string) *v1alpha1.MemberRemovalStatus {
	return &v1alpha1.MemberRemovalStatus{Member: member, MemberID: id, MachineName: machine, NodeName: member,
		StartTime: metav1.Time{Time: now.Add(-time.Second)}, Result: v1alpha1.RemovalInProgress, Message: "removal requested"}
}

// TestReconciler_removalFlow: the hook is released only on proof, the record is written ahead,
// and a blocked Machine does not hold up a removal that is safe.
func TestReconciler_removalFlow(t *testing.T) {
	tests := []struct {
		name string
		// members is how many members and control-plane Machines the scope has; 3 when zero.
		members int
		down    []int
		backend *etcdfake.Cluster
		// prepare deletes Machines and edits the observation.
		prepare func(s *scope)
		check   func(g Gomega, run *flowRun)
	}{
		{
			name:    "The member is recorded InProgress before the backend is asked to remove it",
			backend: &etcdfake.Cluster{RemoveMemberResponses: map[uint64]etcd.Removal{2: {State: etcd.RemovalInProgress, Reason: "waiting for K3s"}}},
			prepare: func(s *scope) { deleting(s.machines[1]) },
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.backend.atRemoveOf).To(HaveLen(1))
				g.Expect(run.backend.atRemoveOf[0]).To(HaveValue(And(HaveField("MemberID", "2"), HaveField("MachineName", "m-cp-1"),
					HaveField("Result", v1alpha1.RemovalInProgress), HaveField("EndTime", BeNil()))))
			},
		},
		{
			name:    "A removal the backend confirms (Removed) releases the hook in the pass that asked for it, the closed record stored before the hook goes",
			prepare: func(s *scope) { deleting(s.machines[1]) },
			check: func(g Gomega, run *flowRun) {
				g.Expect(removedIDs(run.backend.Cluster)).To(Equal([]uint64{2}))
				g.Expect(run.hooked(g, run.s.machines[1])).To(BeFalse())
				g.Expect(run.removalAtMachinePatch).To(ConsistOf(HaveValue(And(HaveField("MemberID", "2"), HaveField("Result", v1alpha1.RemovalRemoved), HaveField("EndTime", Not(BeNil()))))))
			},
		},
		{
			name:    "A pass that removed a member and released its hook ends there: the next Machine's removal waits for an observation without that member",
			members: 5,
			prepare: func(s *scope) {
				deleting(s.machines[3]).DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
				deleting(s.machines[4])
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(removedIDs(run.backend.Cluster)).To(Equal([]uint64{4}))
				g.Expect(run.hooked(g, run.s.machines[3])).To(BeFalse())
				g.Expect(run.hooked(g, run.s.machines[4])).To(BeTrue())
				g.Expect(run.s.requeue().RequeueAfter).To(Equal(confirmRequeueAfter))
			},
		},
		{
			name: "A Machine with a second member keeps its hook once the first is confirmed removed; the record is closed and the pass ends",
			prepare: func(s *scope) {
				deleting(s.machines[1])
				s.snapshot.Members = append(s.snapshot.Members, etcd.Member{ID: 9, Name: "cp-1-again", NodeName: "cp-1", IsLearner: true})
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.backend.RemovedMembers).To(HaveLen(1))
				g.Expect(run.hooked(g, run.s.machines[1])).To(BeTrue())
				g.Expect(run.s.cpe.Status.Removal).To(HaveValue(And(HaveField("MachineName", "m-cp-1"), HaveField("Result", v1alpha1.RemovalRemoved), HaveField("EndTime", Not(BeNil())))))
				g.Expect(run.s.progressing).To(HaveValue(HaveField("Message", ContainSubstring("1 more to remove"))))
			},
		},
		{
			name:    "Leadership moved off the member to remove: the next pass, which asks for the removal, comes at once",
			backend: &etcdfake.Cluster{MoveLeaderResponse: etcd.LeaderMove{Outcome: etcd.LeaderMoved}},
			prepare: func(s *scope) { deleting(s.machines[0]) },
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.backend.MovedLeader).To(HaveLen(1))
				g.Expect(run.backend.RemovedMembers).To(BeEmpty(), "one change per pass")
				g.Expect(run.s.requeue().RequeueAfter).To(Equal(confirmRequeueAfter))
			},
		},
		{
			name:    "A deleting Machine still draining has leadership moved off its member, and nothing removed, so its hook phase needs no pass for it",
			backend: &etcdfake.Cluster{MoveLeaderResponse: etcd.LeaderMove{Outcome: etcd.LeaderMoved}},
			prepare: func(s *scope) {
				deleting(s.machines[0]).Status.Conditions[0].Reason = clusterv1.MachineDeletingDrainingNodeReason
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.backend.MovedLeader).To(HaveLen(1))
				g.Expect(run.backend.MovedLeader[0][0].ID).To(Equal(uint64(1)), "off the leading member of the deleting Machine")
				g.Expect(run.backend.RemovedMembers).To(BeEmpty())
				g.Expect(run.hooked(g, run.s.machines[0])).To(BeTrue())
				g.Expect(run.s.cpe.Status.Removal).To(BeNil())
				g.Expect(run.s.progressing).To(HaveValue(HaveField("Message", ContainSubstring("while Machine m-cp-0 is deleting"))))
				g.Expect(run.s.requeue().RequeueAfter).To(Equal(confirmRequeueAfter))
			},
		},
		{
			name:    "A deleting Machine that waits for another provider's hook has leadership moved off its member",
			backend: &etcdfake.Cluster{MoveLeaderResponse: etcd.LeaderMove{Outcome: etcd.LeaderMoved}},
			prepare: func(s *scope) {
				deleting(s.machines[0]).Annotations[clusterv1.PreTerminateDeleteHookAnnotationPrefix+"/other-provider"] = ""
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.backend.MovedLeader).To(HaveLen(1))
				g.Expect(run.backend.RemovedMembers).To(BeEmpty())
			},
		},
		{
			name:    "A draining Machine whose leading member does not answer keeps leadership for its hook phase to handle: no move, no Warning while it drains",
			down:    []int{0},
			backend: &etcdfake.Cluster{MoveLeaderResponse: etcd.LeaderMove{Outcome: etcd.LeaderMoved}},
			prepare: func(s *scope) {
				deleting(s.machines[0]).Status.Conditions[0].Reason = clusterv1.MachineDeletingDrainingNodeReason
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.backend.MovedLeader).To(BeEmpty())
				g.Expect(run.s.progressing).To(HaveValue(HaveField("Message", ContainSubstring("waiting for drain"))))
			},
		},
		{
			name:    "A draining Machine whose member does not lead changes nothing",
			backend: &etcdfake.Cluster{MoveLeaderResponse: etcd.LeaderMove{Outcome: etcd.LeaderMoved}},
			prepare: func(s *scope) {
				deleting(s.machines[1]).Status.Conditions[0].Reason = clusterv1.MachineDeletingDrainingNodeReason
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.backend.MovedLeader).To(BeEmpty())
				g.Expect(run.backend.RemovedMembers).To(BeEmpty())
			},
		},
		{
			name: "A kubeadm member whose Node object was deleted still belongs to its Machine: blocked on quorum, the hook stays",
			down: []int{0},
			prepare: func(s *scope) {
				deleting(s.machines[1])
				s.snapshot.Members[1].NodeName = "" // kubeadm places no member on a Node that is gone
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.hooked(g, run.s.machines[1])).To(BeTrue())
				g.Expect(run.backend.RemovedMembers).To(BeEmpty())
				g.Expect(run.s.progressing).To(HaveValue(HaveField("Reason", v1alpha1.ProgressingRemovalBlockedReason)))
			},
		},
		{
			name:    "A Machine without a Node whose member is found by name keeps its hook until the member is removed",
			backend: &etcdfake.Cluster{RemoveMemberResponses: map[uint64]etcd.Removal{3: {State: etcd.RemovalInProgress, Reason: "not confirmed yet"}}},
			prepare: func(s *scope) {
				m := deleting(s.machines[2])
				m.Status.NodeRef = clusterv1.MachineNodeReference{}
				s.snapshot.Members[2].Name, s.snapshot.Members[2].NodeName = "m-cp-2", ""
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.hooked(g, run.s.machines[2])).To(BeTrue())
				g.Expect(removedIDs(run.backend.Cluster)).To(Equal([]uint64{3}))
			},
		},
		{
			name:    "A deleting Machine that became the last member's (the others removed after its deletion was admitted) keeps its hook and says why",
			members: 1,
			prepare: func(s *scope) { deleting(s.machines[0]) },
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.hooked(g, run.s.machines[0])).To(BeTrue())
				g.Expect(run.backend.RemovedMembers).To(BeEmpty())
				g.Expect(run.s.progressing).To(HaveValue(And(HaveField("Reason", v1alpha1.ProgressingRemovalBlockedReason),
					HaveField("Message", ContainSubstring("hosts the last etcd member")))))
			},
		},
		{
			name:    "The last member's Machine a person let through the guard with skip-quorum-guard=true is released, its member kept",
			members: 1,
			prepare: func(s *scope) {
				deleting(s.machines[0]).Annotations[v1alpha1.SkipQuorumGuardAnnotation] = v1alpha1.AnnotationTrue
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.hooked(g, run.s.machines[0])).To(BeFalse())
				g.Expect(run.backend.RemovedMembers).To(BeEmpty())
			},
		},
		{
			name: "A Machine without a Node and with no member anywhere is released",
			prepare: func(s *scope) {
				m := deleting(s.machines[2])
				m.Status.NodeRef = clusterv1.MachineNodeReference{}
				dropMember(s, 3)
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.hooked(g, run.s.machines[2])).To(BeFalse())
				g.Expect(run.backend.RemovedMembers).To(BeEmpty())
			},
		},
		{
			name:    "A removal in flight whose member is not visible is confirmed through the backend; no proof, no release",
			backend: &etcdfake.Cluster{RemoveMemberResponses: map[uint64]etcd.Removal{2: {State: etcd.RemovalInProgress, Reason: "K3s claims removed-node-name; no evidence yet"}}},
			prepare: func(s *scope) {
				deleting(s.machines[1])
				s.cpe.Status.Removal = inProgress("cp-1", "2", "m-cp-1")
				dropMember(s, 2)
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.hooked(g, run.s.machines[1])).To(BeTrue())
				g.Expect(removedIDs(run.backend.Cluster)).To(Equal([]uint64{2}))
			},
		},
		{
			name: "A removal in flight confirmed by the backend releases, with the closed record stored before the hook goes",
			prepare: func(s *scope) {
				deleting(s.machines[1])
				s.cpe.Status.Removal = inProgress("cp-1", "2", "m-cp-1")
				dropMember(s, 2)
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.hooked(g, run.s.machines[1])).To(BeFalse())
				g.Expect(run.removalAtMachinePatch).To(HaveLen(1))
				g.Expect(run.removalAtMachinePatch[0]).To(HaveValue(And(HaveField("Result", v1alpha1.RemovalRemoved), HaveField("EndTime", Not(BeNil())))))
			},
		},
		{
			name: "A stopped removal keeps the hook for a person even once its member is not visible",
			prepare: func(s *scope) {
				deleting(s.machines[1])
				rec := inProgress("cp-1", "2", "m-cp-1")
				rec.Result, rec.EndTime, rec.Message = v1alpha1.RemovalTimedOut, &metav1.Time{Time: now}, "the removal waited longer than 10m0s"
				s.cpe.Status.Removal = rec
				dropMember(s, 2)
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.hooked(g, run.s.machines[1])).To(BeTrue())
				g.Expect(run.backend.RemovedMembers).To(BeEmpty())
				g.Expect(run.s.progressing).To(HaveValue(HaveField("Reason", v1alpha1.ProgressingRemovalTimedOutReason)))
			},
		},
		{
			name: "Repair path: the Machine held longest is blocked on quorum, so the broken member of the next one is removed",
			down: []int{2},
			prepare: func(s *scope) {
				deleting(s.machines[0]).DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
				deleting(s.machines[2])
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(removedIDs(run.backend.Cluster)).To(Equal([]uint64{3}))
				g.Expect(run.hooked(g, run.s.machines[0])).To(BeTrue())
			},
		},
		{
			name: "Repair path: no second removal starts while another Machine's removal is in flight",
			down: []int{2},
			prepare: func(s *scope) {
				deleting(s.machines[0]).DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
				deleting(s.machines[1])
				s.cpe.Status.Removal = inProgress("cp-0", "1", "m-cp-0")
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(removedIDs(run.backend.Cluster)).To(BeEmpty())
				g.Expect(run.s.progressing).To(HaveValue(HaveField("Reason", v1alpha1.ProgressingRemovalBlockedReason)))
			},
		},
		{
			name: "A Machine held longest whose drain is not over does not hold up the next one: its member is removed",
			prepare: func(s *scope) {
				a := deleting(s.machines[0])
				a.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
				a.Status.Conditions[0].Reason = clusterv1.MachineDeletingDrainingNodeReason
				deleting(s.machines[2])
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(removedIDs(run.backend.Cluster)).To(Equal([]uint64{3}))
				g.Expect(run.s.storedRemoval).To(HaveValue(HaveField("MachineName", "m-cp-2")))
			},
		},
		{
			name: "A Machine held longest that waits for another provider's hook does not hold up the next one",
			prepare: func(s *scope) {
				a := deleting(s.machines[0])
				a.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
				a.Annotations[clusterv1.PreTerminateDeleteHookAnnotationPrefix+"/other-provider"] = ""
				deleting(s.machines[2])
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(removedIDs(run.backend.Cluster)).To(Equal([]uint64{3}))
			},
		},
		{
			name: "A stopped removal waits for a person without holding up the next Machine, and keeps status.removal: the next one's removal waits, its release goes",
			prepare: func(s *scope) {
				a := deleting(s.machines[0])
				a.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
				rec := inProgress("cp-0", "1", "m-cp-0")
				rec.Result, rec.EndTime, rec.Message = v1alpha1.RemovalTimedOut, &metav1.Time{Time: now}, "the removal waited longer than 10m0s"
				s.cpe.Status.Removal = rec
				deleting(s.machines[1])
				deleting(s.machines[2])
				dropMember(s, 3)
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.hooked(g, run.s.machines[2])).To(BeFalse(), "the Machine with no member is released")
				g.Expect(run.backend.RemovedMembers).To(BeEmpty(), "no removal replaces the stopped one in status.removal")
				g.Expect(run.s.storedRemoval).To(HaveValue(And(HaveField("MachineName", "m-cp-0"), HaveField("Result", v1alpha1.RemovalTimedOut))))
				g.Expect(run.s.progressing).To(HaveValue(HaveField("Reason", v1alpha1.ProgressingRemovalTimedOutReason)))
			},
		},
		{
			name: "Repair path: the removal of the Machine held longest went out and is refused now that another member is down; the down member's Machine is handled beside it",
			down: []int{2},
			prepare: func(s *scope) {
				deleting(s.machines[0]).DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
				s.cpe.Status.Removal = inProgress("cp-0", "1", "m-cp-0")
				deleting(s.machines[2])
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(removedIDs(run.backend.Cluster)).To(Equal([]uint64{3}))
				g.Expect(run.backend.atRemoveOf).To(ConsistOf(HaveValue(And(HaveField("MachineName", "m-cp-2"), HaveField("MemberID", "3")))),
					"the write-ahead record is the down member's")
				g.Expect(run.hooked(g, run.s.machines[0])).To(BeTrue())
			},
		},
		{
			name:    "Repair path: beside a refused removal that went out, the down member's removal waits when both together would lose quorum",
			members: 4,
			down:    []int{2},
			prepare: func(s *scope) {
				// 3 voters and the learner cp-3: removing cp-0 is refused with cp-2 down (1 of 2
				// voters healthy once the learner is promoted); removing cp-2 alone keeps 2 of 2,
				// but then cp-0's removal, if etcd applies it, leaves 1 of 1 with a learner.
				s.snapshot.Members[3].IsLearner = true
				deleting(s.machines[0]).DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
				s.cpe.Status.Removal = inProgress("cp-0", "1", "m-cp-0")
				deleting(s.machines[2])
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.backend.RemovedMembers).To(BeEmpty())
				g.Expect(run.s.storedRemoval).To(HaveValue(HaveField("MachineName", "m-cp-0")))
				g.Expect(run.s.progressing).To(HaveValue(HaveField("Reason", v1alpha1.ProgressingRemovalBlockedReason)))
			},
		},
		{
			name:    "Repair path: a K3s removal in progress is never replaced, refused or not: its record is what its release is proven by",
			down:    []int{2},
			backend: &etcdfake.Cluster{},
			prepare: func(s *scope) {
				s.snapshot.SyntheticMemberIDs = true
				deleting(s.machines[0]).DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
				s.cpe.Status.Removal = inProgress("cp-0", "", "m-cp-0")
				deleting(s.machines[2])
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.backend.RemovedMembers).To(BeEmpty())
				g.Expect(run.s.storedRemoval).To(HaveValue(HaveField("MachineName", "m-cp-0")))
			},
		},
		{
			name:    "A backend whose IDs are not etcd's (K3s) gets its removal recorded by member name and Node, with no member ID",
			backend: &etcdfake.Cluster{RemoveMemberResponses: map[uint64]etcd.Removal{2: {State: etcd.RemovalInProgress, Reason: "waiting for K3s"}}},
			prepare: func(s *scope) {
				s.snapshot.SyntheticMemberIDs = true
				deleting(s.machines[1])
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.backend.atRemoveOf).To(HaveLen(1))
				g.Expect(run.backend.atRemoveOf[0]).To(HaveValue(And(HaveField("Member", "cp-1"), HaveField("NodeName", "cp-1"),
					HaveField("MemberID", BeEmpty()), HaveField("Result", v1alpha1.RemovalInProgress))))
				g.Expect(run.s.storedRemoval).To(HaveValue(HaveField("MemberID", BeEmpty())))
			},
		},
		{
			name:    "A K3s removal in flight is matched to its member by name and Node: asked again, the record kept as it is",
			backend: &etcdfake.Cluster{RemoveMemberResponses: map[uint64]etcd.Removal{2: {State: etcd.RemovalInProgress, Reason: "waiting for K3s"}}},
			prepare: func(s *scope) {
				s.snapshot.SyntheticMemberIDs = true
				deleting(s.machines[1])
				s.cpe.Status.Removal = inProgress("cp-1", "", "m-cp-1")
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(removedIDs(run.backend.Cluster)).To(Equal([]uint64{2}))
				g.Expect(run.s.storedRemoval).To(HaveValue(And(HaveField("Member", "cp-1"), HaveField("MemberID", BeEmpty()),
					HaveField("StartTime", metav1.Time{Time: now.Add(-time.Second)}), HaveField("Result", v1alpha1.RemovalInProgress))))
			},
		},
		{
			name: "A K3s removal in flight whose member is not visible is confirmed through the backend by name and Node, then released",
			prepare: func(s *scope) {
				s.snapshot.SyntheticMemberIDs = true
				deleting(s.machines[1])
				s.cpe.Status.Removal = inProgress("cp-1", "", "m-cp-1")
				dropMember(s, 2)
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.backend.RemovedMembers).To(Equal([]etcd.Member{{Name: "cp-1", NodeName: "cp-1"}}))
				g.Expect(run.hooked(g, run.s.machines[1])).To(BeFalse())
				g.Expect(run.s.storedRemoval).To(HaveValue(And(HaveField("Result", v1alpha1.RemovalRemoved), HaveField("MemberID", BeEmpty()))))
			},
		},
		{
			name:    "Upgrade: a K3s record an earlier version wrote with its synthetic ID continues against the same member, and the ID is dropped",
			backend: &etcdfake.Cluster{RemoveMemberResponses: map[uint64]etcd.Removal{2: {State: etcd.RemovalInProgress, Reason: "waiting for K3s"}}},
			prepare: func(s *scope) {
				s.snapshot.SyntheticMemberIDs = true
				deleting(s.machines[1])
				// The ID is not the snapshot's on purpose: only the name and Node may decide.
				s.cpe.Status.Removal = inProgress("cp-1", "1b57f0c2aa9d3e41", "m-cp-1")
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(removedIDs(run.backend.Cluster)).To(Equal([]uint64{2}), "the recorded member, and no other")
				g.Expect(run.hooked(g, run.s.machines[1])).To(BeTrue())
				g.Expect(run.s.storedRemoval).To(HaveValue(And(HaveField("Member", "cp-1"), HaveField("MemberID", BeEmpty()),
					HaveField("StartTime", metav1.Time{Time: now.Add(-time.Second)}), HaveField("Result", v1alpha1.RemovalInProgress))))
			},
		},
		{
			name: "Upgrade: a K3s record with its synthetic ID whose member is gone is confirmed by name and Node before the hook goes",
			backend: &etcdfake.Cluster{RemoveMemberResponses: map[uint64]etcd.Removal{0: {State: etcd.RemovalInProgress,
				Reason: "K3s claims removed-node-name; no evidence yet"}}},
			prepare: func(s *scope) {
				s.snapshot.SyntheticMemberIDs = true
				deleting(s.machines[1])
				s.cpe.Status.Removal = inProgress("cp-1", "1b57f0c2aa9d3e41", "m-cp-1")
				dropMember(s, 2)
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.backend.RemovedMembers).To(Equal([]etcd.Member{{Name: "cp-1", NodeName: "cp-1"}}))
				g.Expect(run.hooked(g, run.s.machines[1])).To(BeTrue(), "no proof, no release")
			},
		},
		{
			name: "A K3s record InProgress for a Machine no longer held is closed as Released while its member, by name and Node, is there",
			prepare: func(s *scope) {
				s.snapshot.SyntheticMemberIDs = true
				s.cpe.Status.Removal = inProgress("cp-1", "", "m-cp-9")
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.s.storedRemoval).To(HaveValue(And(HaveField("Result", v1alpha1.RemovalReleased), HaveField("EndTime", Not(BeNil())))))
			},
		},
		{
			name: "A record InProgress for a Machine no longer held is closed as Removed when its member is gone",
			prepare: func(s *scope) {
				s.cpe.Status.Removal = inProgress("cp-9", "9", "m-cp-9")
			},
			check: func(g Gomega, run *flowRun) {
				g.Expect(run.s.storedRemoval).To(HaveValue(And(HaveField("Result", v1alpha1.RemovalRemoved), HaveField("EndTime", Not(BeNil())))))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := testScope(cmp.Or(tt.members, 3), tt.down...)
			tt.prepare(s)
			backend := tt.backend
			if backend == nil {
				backend = &etcdfake.Cluster{}
			}
			run := newFlowRun(t, s, backend)
			run.reconcile(g)
			tt.check(g, run)
		})
	}
}
