package controlplaneetcd

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	etcdfake "github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
)

// staticBackends hands out one scripted etcd.Cluster for every Cluster and counts how often it
// was asked, so a test can tell whether a pass observed etcd at all.
type staticBackends struct {
	mu      sync.Mutex
	cluster *etcdfake.Cluster
	asked   int
}

func (b *staticBackends) For(context.Context, *clusterv1.Cluster, v1alpha1.Backend) (etcd.Cluster, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked++
	return b.cluster, nil
}

func (b *staticBackends) Forget(types.UID) error { return nil }

func (b *staticBackends) timesAsked() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.asked
}

// healthySnapshot is an observation, taken now, of voters on Nodes cp-0.. (cp-0 leading) that
// all answer, leaving out the members in gone.
func healthySnapshot(n int, gone ...int) *etcd.Snapshot {
	at := time.Now()
	snap := &etcd.Snapshot{Backend: "test", ObservedAt: at, LeaderID: 1}
	for i := range n {
		if containsInt(gone, i) {
			continue
		}
		node := fmt.Sprintf("cp-%d", i)
		snap.Members = append(snap.Members, etcd.Member{ID: uint64(i + 1), Name: node, NodeName: node})
	}
	for _, m := range snap.Members {
		snap.Evidence = append(snap.Evidence, etcd.MemberEvidence{MemberID: m.ID, NodeName: m.NodeName, Contact: etcd.ContactAnswered,
			ObservedAt: at, ClusterID: 0xc1, Members: snap.Members, LeaderID: 1})
	}
	return snap
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// reconcileEnv is one test's namespace in the management cluster, its Cluster, and a Reconciler
// wired as setup.Setup wires it (the manager's cached client and API reader), with a scripted
// etcd behind it.
type reconcileEnv struct {
	mgmt     *management
	ns       string
	cluster  *clusterv1.Cluster
	backends *staticBackends
	recorder *eventRecorder
	r        *Reconciler
}

func newReconcileEnv(t *testing.T, g Gomega, name string, paused bool) *reconcileEnv {
	t.Helper()
	m := managementCluster(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "reconcile-"}}
	g.Expect(m.direct.Create(ctx, ns)).To(Succeed())
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
		Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}}}
	if paused {
		cluster.Spec.Paused = ptr.To(true)
	}
	g.Expect(m.direct.Create(ctx, cluster)).To(Succeed())
	e := &reconcileEnv{mgmt: m, ns: ns.Name, cluster: cluster, backends: &staticBackends{cluster: &etcdfake.Cluster{}}, recorder: &eventRecorder{}}
	e.r = &Reconciler{Client: m.cached, APIReader: m.apiReader, Backends: e.backends, Recorder: e.recorder}
	e.cached(g, cluster)
	return e
}

// cached waits until the manager's cache shows obj as the apiserver last returned it.
func (e *reconcileEnv) cached(g Gomega, obj client.Object) {
	got := obj.DeepCopyObject().(client.Object)
	g.Eventually(func() string {
		if err := e.mgmt.cached.Get(context.Background(), client.ObjectKeyFromObject(obj), got); err != nil {
			return err.Error()
		}
		return got.GetResourceVersion()
	}, time.Minute, 50*time.Millisecond).Should(Equal(obj.GetResourceVersion()))
}

func (e *reconcileEnv) createCPE(g Gomega, name string, mode v1alpha1.Mode) *v1alpha1.ControlPlaneEtcd {
	cpe := &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: e.cluster.Name, Backend: v1alpha1.BackendKubeadm, Mode: mode}}
	g.Expect(e.mgmt.direct.Create(context.Background(), cpe)).To(Succeed())
	e.cached(g, cpe)
	return cpe
}

// createMachine creates control-plane Machine m-<node> on Node node, as Cluster API's Machine
// controller leaves it once the Node registered. A deleting Machine carries etcd-adapter's hook
// and a finalizer, and its Deleting condition says the pre-terminate hooks are what it waits for
// (drain and volume detach are over).
func (e *reconcileEnv) createMachine(g Gomega, node string, deleting bool) *clusterv1.Machine {
	ctx := context.Background()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "m-" + node,
			Labels: map[string]string{clusterv1.ClusterNameLabel: e.cluster.Name, clusterv1.MachineControlPlaneLabel: ""}},
		Spec: clusterv1.MachineSpec{ClusterName: e.cluster.Name, Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("m-" + node)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TestMachine", Name: "m-" + node}},
	}
	if deleting {
		m.Finalizers = []string{"test.etcd-adapter/keep"}
		m.Annotations = map[string]string{v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue}
	}
	g.Expect(e.mgmt.direct.Create(ctx, m)).To(Succeed())
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
	if deleting {
		conditions.Set(m, metav1.Condition{Type: clusterv1.MachineDeletingCondition, Status: metav1.ConditionTrue,
			Reason: clusterv1.MachineDeletingWaitingForPreTerminateHookReason})
	}
	g.Expect(e.mgmt.direct.Status().Update(ctx, m)).To(Succeed())
	if deleting {
		g.Expect(e.mgmt.direct.Delete(ctx, m)).To(Succeed())
		g.Expect(e.mgmt.direct.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	}
	e.cached(g, m)
	return m
}

func (e *reconcileEnv) reconcile(g Gomega, cpe *v1alpha1.ControlPlaneEtcd) ctrl.Result {
	result, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cpe)})
	g.Expect(err).NotTo(HaveOccurred())
	return result
}

// firstPass runs the first pass of cpe: as Cluster API's paused.EnsurePausedCondition does on
// every object's first pass, it only sets Paused (False) and ends, and the write wakes the next
// pass. It checks that nothing else was written or observed.
func (e *reconcileEnv) firstPass(g Gomega, cpe *v1alpha1.ControlPlaneEtcd) {
	asked := e.backends.timesAsked()
	g.Expect(e.reconcile(g, cpe)).To(Equal(ctrl.Result{}))
	got := &v1alpha1.ControlPlaneEtcd{}
	g.Expect(e.mgmt.direct.Get(context.Background(), client.ObjectKeyFromObject(cpe), got)).To(Succeed())
	g.Expect(got.Status.Conditions).To(ConsistOf(And(HaveField("Type", v1alpha1.PausedCondition), HaveField("Status", metav1.ConditionFalse))))
	g.Expect(e.backends.timesAsked()).To(Equal(asked))
	e.woken(g, cpe)
}

// woken waits until the manager's cache shows cpe as stored: a controller's next pass after a
// write is started by the watch event of that write, which reaches the cache first.
func (e *reconcileEnv) woken(g Gomega, cpe *v1alpha1.ControlPlaneEtcd) {
	got := &v1alpha1.ControlPlaneEtcd{}
	g.Expect(e.mgmt.direct.Get(context.Background(), client.ObjectKeyFromObject(cpe), got)).To(Succeed())
	e.cached(g, got)
}

// stored reads obj as the apiserver holds it.
func (e *reconcileEnv) stored(g Gomega, obj client.Object) {
	g.Expect(e.mgmt.direct.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
}

// TestReconciler_Reconcile calls Reconcile against a real apiserver for the paths that return
// before the removal flow (a paused Cluster, a duplicate ControlPlaneEtcd) and for the status the
// pass writes at its end, next to the removal record the removal flow writes ahead.
func TestReconciler_Reconcile(t *testing.T) {
	t.Run("A paused Cluster's ControlPlaneEtcd gets Paused and nothing else: etcd is not observed", func(t *testing.T) {
		g := NewWithT(t)
		e := newReconcileEnv(t, g, "paused", true)
		cpe := e.createCPE(g, "paused", v1alpha1.ModeManage)
		m := e.createMachine(g, "cp-0", false)

		// The first pass sets Paused and ends, as every first pass does (firstPass); the second is
		// one of the passes that come while the Cluster stays paused.
		for range 2 {
			g.Expect(e.reconcile(g, cpe)).To(Equal(ctrl.Result{}))
			e.woken(g, cpe)
		}

		e.stored(g, cpe)
		g.Expect(conditions.Get(cpe, v1alpha1.PausedCondition)).To(HaveValue(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", clusterv1.PausedReason))))
		g.Expect(conditions.Get(cpe, v1alpha1.AvailableCondition)).To(BeNil())
		g.Expect(conditions.Get(cpe, v1alpha1.EtcdClusterHealthyCondition)).To(BeNil())
		g.Expect(cpe.Status.ObservedGeneration).To(BeZero())
		g.Expect(e.backends.timesAsked()).To(BeZero())
		e.stored(g, m)
		g.Expect(m.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation), "a paused Cluster's Machines are not touched")
	})

	t.Run("A second ControlPlaneEtcd of the same Cluster says on every condition which one is in charge, and observes nothing", func(t *testing.T) {
		g := NewWithT(t)
		e := newReconcileEnv(t, g, "dup", false)
		first := e.createCPE(g, "a-first", v1alpha1.ModeObserve)
		second := e.createCPE(g, "b-second", v1alpha1.ModeObserve)
		e.backends.cluster.ObserveResponse = healthySnapshot(3)
		e.firstPass(g, second)

		result := e.reconcile(g, second)

		g.Expect(result.RequeueAfter).To(Equal(second.Spec.ObservationIntervalOrDefault()), "nothing wakes a duplicate when the one in charge goes")
		e.stored(g, second)
		for _, c := range []string{v1alpha1.AvailableCondition, v1alpha1.DegradedCondition, v1alpha1.ProgressingCondition, v1alpha1.EtcdClusterHealthyCondition} {
			g.Expect(conditions.Get(second, c)).To(HaveValue(And(HaveField("Reason", v1alpha1.DuplicateReason),
				HaveField("Message", ContainSubstring("ControlPlaneEtcd a-first is in charge of Cluster dup")))), c)
		}
		g.Expect(conditions.Get(second, v1alpha1.AvailableCondition).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(second.Status.Members).To(BeEmpty())
		g.Expect(e.backends.timesAsked()).To(BeZero())
		g.Expect(e.recorder.events).To(ContainElement(matchEvent(corev1.EventTypeWarning, v1alpha1.EventDuplicate, v1alpha1.ControlPlaneEtcdKind, "b-second")))

		e.firstPass(g, first)
		e.reconcile(g, first)

		e.stored(g, first)
		g.Expect(conditions.Get(first, v1alpha1.AvailableCondition)).To(HaveValue(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", Not(Equal(v1alpha1.DuplicateReason))))))
		g.Expect(e.backends.timesAsked()).To(Equal(1))
	})

	t.Run("A pass writes what it observed at its end, with the generation it observed", func(t *testing.T) {
		g := NewWithT(t)
		e := newReconcileEnv(t, g, "observe", false)
		cpe := e.createCPE(g, "observe", v1alpha1.ModeObserve)
		for _, node := range []string{"cp-0", "cp-1", "cp-2"} {
			e.createMachine(g, node, false)
		}
		e.backends.cluster.ObserveResponse = healthySnapshot(3)
		e.firstPass(g, cpe)

		result := e.reconcile(g, cpe)

		g.Expect(result.RequeueAfter).To(Equal(cpe.Spec.ObservationIntervalOrDefault()))
		e.stored(g, cpe)
		g.Expect(cpe.Status.ObservedGeneration).To(Equal(cpe.Generation))
		g.Expect(cpe.Status.MemberCount).To(HaveValue(BeEquivalentTo(3)))
		g.Expect(cpe.Status.Leader).To(Equal("cp-0"))
		g.Expect(conditions.Get(cpe, v1alpha1.EtcdClusterHealthyCondition)).To(HaveValue(HaveField("Status", metav1.ConditionTrue)), "%+v", cpe.Status.Conditions)
		g.Expect(conditions.Get(cpe, v1alpha1.AvailableCondition)).To(HaveValue(HaveField("Status", metav1.ConditionTrue)))
		g.Expect(conditions.Get(cpe, v1alpha1.ProgressingCondition)).To(HaveValue(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1alpha1.ProgressingReconciledReason))))
		g.Expect(cpe.Status.Members).To(HaveEach(HaveField("MachineName", HavePrefix("m-cp-"))))
		g.Expect(conditions.Get(cpe, v1alpha1.PausedCondition)).To(HaveValue(HaveField("Status", metav1.ConditionFalse)))
	})

	t.Run("The removal record written ahead mid-pass and the status written at the end of the pass both land; the pass the backend confirmed the removal in releases, and the next one observes without the member", func(t *testing.T) {
		g := NewWithT(t)
		e := newReconcileEnv(t, g, "manage", false)
		cpe := e.createCPE(g, "manage", v1alpha1.ModeManage)
		running0, deleting, running2 := e.createMachine(g, "cp-0", false), e.createMachine(g, "cp-1", true), e.createMachine(g, "cp-2", false)
		e.backends.cluster.ObserveResponse = healthySnapshot(3)
		e.firstPass(g, cpe)

		result := e.reconcile(g, cpe)

		g.Expect(result.RequeueAfter).To(Equal(confirmRequeueAfter), "the pass's observation still shows the member it removed")
		g.Expect(removedIDs(e.backends.cluster)).To(Equal([]uint64{2}))
		e.stored(g, cpe)
		g.Expect(cpe.Status.Removal).To(HaveValue(And(HaveField("MachineName", "m-cp-1"), HaveField("MemberID", "2"),
			HaveField("Result", v1alpha1.RemovalRemoved), HaveField("EndTime", Not(BeNil())))))
		g.Expect(conditions.Get(cpe, v1alpha1.ProgressingCondition)).To(HaveValue(And(HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", v1alpha1.ProgressingMemberRemovalReason), HaveField("Message", ContainSubstring("Removed etcd member cp-1 of Machine m-cp-1 and released its hook")))))
		g.Expect(cpe.Status.ObservedGeneration).To(Equal(cpe.Generation))
		e.stored(g, deleting)
		g.Expect(deleting.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation))
		for _, m := range []*clusterv1.Machine{running0, running2} {
			e.stored(g, m)
			g.Expect(m.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue), m.Name)
		}

		e.backends.cluster.ObserveResponse = healthySnapshot(3, 1)
		e.cached(g, deleting)
		e.reconcile(g, cpe)

		g.Expect(removedIDs(e.backends.cluster)).To(Equal([]uint64{2}), "nothing is asked again")
		e.stored(g, cpe)
		g.Expect(cpe.Status.Removal).To(HaveValue(And(HaveField("MachineName", "m-cp-1"), HaveField("Result", v1alpha1.RemovalRemoved), HaveField("EndTime", Not(BeNil())))))
		g.Expect(cpe.Status.MemberCount).To(HaveValue(BeEquivalentTo(2)))
		g.Expect(conditions.Get(cpe, v1alpha1.ProgressingCondition)).To(HaveValue(HaveField("Status", metav1.ConditionFalse)))
	})
}
