package handback

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// holdFinalizer keeps a deleted Machine in the apiserver, as Cluster API's own finalizer and the
// other pre-terminate hooks do while the hand-back runs; no Machine controller runs here.
const holdFinalizer = "test.etcd-adapter.io/hold"

// TestReconciler_Reconcile runs Reconcile against a real apiserver for one hooked control-plane
// Machine per case and asserts what it leaves in the apiserver (the hook kept or taken off) and
// the Event it records.
func TestReconciler_Reconcile(t *testing.T) {
	optOut := map[string]string{v1alpha1.OptOutAnnotation: v1alpha1.AnnotationTrue}
	tests := []struct {
		name string
		// kind is the Cluster's control-plane kind; annotations are the Cluster's.
		kind        string
		annotations map[string]string
		// paused pauses the Cluster (spec.paused), as clusterctl move does.
		paused bool
		// controlPlaneEtcd creates a ControlPlaneEtcd that names the Cluster.
		controlPlaneEtcd bool
		// noCluster creates the Machine only.
		noCluster bool
		// deleting deletes the Machine (a finalizer keeps it) after its Node was bound.
		deleting bool
		// wantHandedBack is whether the hook is gone afterwards; wantEvent the Event's type,
		// reason and message start ("" for none).
		wantHandedBack bool
		wantEvent      string
		// wantOptedOutBy is whether the Event names the opt-out annotation's field manager, on
		// the Machine and (prefixed with the Machine) on the Cluster.
		wantOptedOutBy bool
	}{
		{name: "an opted-out K3s Cluster without a ControlPlaneEtcd gets its Machine back, with a Warning naming who opted it out, on the Machine and the Cluster", kind: "KThreesControlPlane", annotations: optOut,
			wantHandedBack: true, wantEvent: "Warning HookHandedBackOptedOut Took the etcd-adapter pre-terminate hook off: Cluster c has no ControlPlaneEtcd", wantOptedOutBy: true},
		{name: "a KubeadmControlPlane Cluster without a ControlPlaneEtcd gets its Machine back: its default is Observe", kind: "KubeadmControlPlane",
			wantHandedBack: true, wantEvent: "Normal HookHandedBack Took the etcd-adapter pre-terminate hook off: Cluster c has no ControlPlaneEtcd"},
		{name: "a deleting Machine is released with a Warning naming its Node", kind: "KThreesControlPlane", annotations: optOut, deleting: true,
			wantHandedBack: true, wantEvent: `Warning HookHandedBackOptedOut Released the etcd-adapter pre-terminate hook without removing the etcd member of Node "node-0"`, wantOptedOutBy: true},
		{name: "an opted-out Cluster whose ControlPlaneEtcd still exists keeps the hook: that controller owns it", kind: "KThreesControlPlane", annotations: optOut,
			controlPlaneEtcd: true},
		{name: "a K3s Cluster about to get its ControlPlaneEtcd in Manage keeps the hook", kind: "KThreesControlPlane"},
		{name: "a paused Cluster keeps the hook", kind: "KThreesControlPlane", annotations: optOut, paused: true},
		{name: "a Machine whose Cluster does not exist (another shard's, or not created yet) keeps the hook", kind: "KThreesControlPlane", noCluster: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			c := apiServer.Client
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "handback-"}}
			g.Expect(c.Create(ctx, ns)).To(Succeed())
			cluster := &clusterv1.Cluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "c", Annotations: tt.annotations},
				Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: "controlplane.cluster.x-k8s.io", Kind: tt.kind, Name: "c"}},
			}
			if tt.paused {
				cluster.Spec.Paused = ptr.To(true)
			}
			if !tt.noCluster {
				// Note: created by field manager "tenant-kubectl", which the opt-out Event names.
				g.Expect(c.Create(ctx, cluster, client.FieldOwner("tenant-kubectl"))).To(Succeed())
			}
			if tt.controlPlaneEtcd {
				g.Expect(c.Create(ctx, &v1alpha1.ControlPlaneEtcd{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "c"},
					Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c", Backend: v1alpha1.BackendK3s, Mode: v1alpha1.ModeObserve},
				})).To(Succeed())
			}
			m := createHookedMachine(ctx, t, c, cluster, tt.deleting)

			recorder := record.NewFakeRecorder(10)
			r := &Reconciler{Client: c, APIReader: c, Recorder: recorder}
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(m)}
			g.Expect(r.Reconcile(ctx, req)).To(Equal(ctrl.Result{}))

			got := &clusterv1.Machine{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			if tt.wantHandedBack {
				g.Expect(got.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation))
			} else {
				g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue))
			}
			switch {
			case tt.wantEvent == "":
				g.Expect(drain(recorder)).To(BeEmpty())
			case tt.wantOptedOutBy:
				by := ContainSubstring(`annotation ` + v1alpha1.OptOutAnnotation + ` set by field manager "tenant-kubectl"`)
				g.Expect(drain(recorder)).To(ConsistOf(And(HavePrefix(tt.wantEvent), by),
					And(HavePrefix("Warning "+v1alpha1.EventHookHandedBackOptedOut+" Machine "+m.Name+": "), by)))
			default:
				g.Expect(drain(recorder)).To(ConsistOf(HavePrefix(tt.wantEvent)))
			}

			g.Expect(r.Reconcile(ctx, req)).To(Equal(ctrl.Result{}), "a second pass")
			g.Expect(drain(recorder)).To(BeEmpty(), "a second pass records nothing")
		})
	}
}

// createHookedMachine creates a control-plane Machine of cluster with etcd-adapter's hook. A
// deleting one has its Node bound (status.nodeRef, as Cluster API's Machine controller sets it)
// and is deleted while a finalizer holds it; the finalizer goes when the test ends.
func createHookedMachine(ctx context.Context, t *testing.T, c client.Client, cluster *clusterv1.Cluster, deleting bool) *clusterv1.Machine {
	g := NewWithT(t)
	m, err := env.CreateControlPlaneMachine(ctx, c, env.MachineInput{
		Cluster: cluster, Name: "c-cp-0", ProviderID: "test://node-0",
		Annotations: map[string]string{v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue},
	})
	g.Expect(err).NotTo(HaveOccurred())
	if !deleting {
		return m
	}
	before := m.DeepCopy()
	controllerutil.AddFinalizer(m, holdFinalizer)
	g.Expect(c.Patch(ctx, m, client.MergeFrom(before))).To(Succeed())
	before = m.DeepCopy()
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: "node-0"}
	g.Expect(c.Status().Patch(ctx, m, client.MergeFrom(before))).To(Succeed())
	g.Expect(c.Delete(ctx, m)).To(Succeed())
	t.Cleanup(func() {
		got := &clusterv1.Machine{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(m), got); err != nil {
			return
		}
		before := got.DeepCopy()
		controllerutil.RemoveFinalizer(got, holdFinalizer)
		g.Expect(c.Patch(context.Background(), got, client.MergeFrom(before))).To(Succeed())
	})
	return m
}

// drain returns the Events recorded so far ("<type> <reason> <message>").
func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
