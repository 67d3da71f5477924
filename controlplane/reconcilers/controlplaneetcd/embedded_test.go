package controlplaneetcd

import (
	"context"
	"maps"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/capimachine"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

// kthreesControlPlaneGVK is cluster-api-k3s's control-plane kind, as its CRD serves it.
var kthreesControlPlaneGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: kthreesControlPlaneKind}

// k3sProviderHook is the hook of a KThreesControlPlane-style provider that embeds the removal flow.
var k3sProviderHook = hook.Hook{Key: hook.PreTerminateHookPrefix + "/k3s-etcd", Value: "k3s"}

// installKThreesControlPlaneCRD installs a CustomResourceDefinition for KThreesControlPlane
// (without cluster-api-k3s's schema) unless it is there, and waits until it is served.
func installKThreesControlPlaneCRD(g Gomega, m *management) {
	gvk := kthreesControlPlaneGVK
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "kthreescontrolplanes." + gvk.Group, Labels: map[string]string{"cluster.x-k8s.io/v1beta2": gvk.Version}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: gvk.Kind, ListKind: gvk.Kind + "List", Plural: "kthreescontrolplanes", Singular: "kthreescontrolplane"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: gvk.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}}}},
		},
	}
	if err := m.direct.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(func() error {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		return m.direct.List(context.Background(), list)
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
}

// withKThreesControlPlane makes the Cluster's control plane a KThreesControlPlane with the given
// annotations, as cluster-api-k3s's users create it.
func (e *reconcileEnv) withKThreesControlPlane(g Gomega, annotations map[string]string) {
	ctx := context.Background()
	installKThreesControlPlaneCRD(g, e.mgmt)
	cp := &unstructured.Unstructured{}
	cp.SetGroupVersionKind(kthreesControlPlaneGVK)
	cp.SetNamespace(e.ns)
	cp.SetName(e.cluster.Name)
	cp.SetAnnotations(annotations)
	g.Expect(e.mgmt.direct.Create(ctx, cp)).To(Succeed())
	before := e.cluster.DeepCopy()
	e.cluster.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: kthreesControlPlaneGVK.Group, Kind: kthreesControlPlaneGVK.Kind, Name: cp.GetName()}
	g.Expect(e.mgmt.direct.Patch(ctx, e.cluster, client.MergeFrom(before))).To(Succeed())
	e.cached(g, e.cluster)
}

// providerSide plays the provider that embeds the flow: it reads its Machines from the
// apiserver and patches their annotations as its own client would.
type providerSide struct {
	e    *reconcileEnv
	flow hook.Flow
}

func (e *reconcileEnv) providerSide(backend etcd.Cluster) *providerSide {
	p := &providerSide{e: e}
	p.flow = hook.Flow{Hook: k3sProviderHook, Cluster: backend, Patch: p.patch, ControlPlane: hook.ControlPlane{Kind: kthreesControlPlaneKind}}
	return p
}

func (p *providerSide) patch(ctx context.Context, name string, set map[string]string, remove []string) error {
	m := &clusterv1.Machine{}
	if err := p.e.mgmt.direct.Get(ctx, client.ObjectKey{Namespace: p.e.ns, Name: name}, m); err != nil {
		return err
	}
	before := m.DeepCopy()
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	maps.Copy(m.Annotations, set)
	for _, k := range remove {
		delete(m.Annotations, k)
	}
	return p.e.mgmt.direct.Patch(ctx, m, client.MergeFrom(before))
}

// step runs one step of the provider's flow for the named Machine, on the Machines as stored.
func (p *providerSide) step(g Gomega, name string) hook.Outcome {
	ctx := context.Background()
	list := &clusterv1.MachineList{}
	g.Expect(p.e.mgmt.direct.List(ctx, list, client.InNamespace(p.e.ns))).To(Succeed())
	var state hook.MachineState
	p.flow.Machines = nil
	for i := range list.Items {
		m := &list.Items[i]
		p.flow.Machines = append(p.flow.Machines, capimachine.Facts(m))
		if m.Name == name {
			state = hook.MachineState{Machine: capimachine.Facts(m), Annotations: m.Annotations}
			if c := conditions.Get(m, clusterv1.MachineDeletingCondition); c != nil {
				state.DeletingReason = c.Reason
			}
		}
	}
	g.Expect(state.Name).To(Equal(name))
	o, err := p.flow.Step(ctx, state)
	g.Expect(err).NotTo(HaveOccurred())
	return o
}

// TestReconciler_embeddedRemoval runs the manager (mode Manage, as KThreesControlPlane Clusters
// get by default) next to a provider that embeds the removal flow (pkg/etcd/hook) on a real
// apiserver. The provider puts its hook on the Machines and, once Cluster API drained a
// Machine, waits for every other pre-terminate hook (hook.MayAct); the manager's own hook waits
// for every hook it does not know to run last.
func TestReconciler_embeddedRemoval(t *testing.T) {
	deletingWithBothHooks := func(g Gomega, e *reconcileEnv) *clusterv1.Machine {
		m := e.createMachine(g, "cp-1", true)
		before := m.DeepCopy()
		m.Annotations[k3sProviderHook.Key] = k3sProviderHook.Value
		g.Expect(e.mgmt.direct.Patch(context.Background(), m, client.MergeFrom(before))).To(Succeed())
		e.cached(g, m)
		return m
	}

	t.Run("With the annotation the manager takes its hook off and removes nothing; the provider's flow then removes the member once and the Machine goes", func(t *testing.T) {
		g := NewWithT(t)
		e := newReconcileEnv(t, g, "embedded", false)
		e.withKThreesControlPlane(g, map[string]string{hook.EmbeddedRemovalAnnotation: k3sProviderHook.Key})
		cpe := e.createCPE(g, "embedded", v1alpha1.ModeManage)
		running := e.createMachine(g, "cp-0", false)
		deleting := deletingWithBothHooks(g, e)
		e.createMachine(g, "cp-2", false)
		e.backends.cluster.ObserveResponse = healthySnapshot(3)
		e.backends.cluster.ApplyChanges = true
		provider := e.providerSide(e.backends.cluster)

		// The provider's flow waits for the manager's hook, as for any hook that does not run last.
		o := provider.step(g, deleting.Name)
		g.Expect(o.Phase).To(Equal(hook.PhaseWaitingForHooks))
		g.Expect(o.Waiting).To(Equal([]string{hook.ManagerHookKey}))

		e.firstPass(g, cpe)
		g.Eventually(func(g Gomega) {
			e.reconcile(g, cpe)
			e.stored(g, deleting)
			g.Expect(deleting.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation))
		}, time.Minute, 100*time.Millisecond).Should(Succeed())
		g.Expect(removedIDs(e.backends.cluster)).To(BeEmpty(), "the manager removed a member the provider removes")
		g.Expect(deleting.Annotations).To(HaveKey(k3sProviderHook.Key))
		e.stored(g, running)
		g.Expect(running.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation), "the manager holds no Machine of the Cluster")
		e.stored(g, cpe)
		g.Expect(conditions.Get(cpe, v1alpha1.ProgressingCondition)).To(HaveValue(And(HaveField("Reason", v1alpha1.ProgressingProviderRemovesMembersReason),
			HaveField("Message", ContainSubstring(hook.EmbeddedRemovalAnnotation)))))

		var phases []hook.Phase
		for range 5 {
			o = provider.step(g, deleting.Name)
			phases = append(phases, o.Phase)
			if o.Done() {
				break
			}
		}
		g.Expect(phases).To(Equal([]hook.Phase{hook.PhaseRemoving, hook.PhaseReleased}))
		g.Expect(removedIDs(e.backends.cluster)).To(Equal([]uint64{2}))

		// Cluster API deletes the infrastructure once no hook is left; the test's finalizer stands
		// in for it.
		e.stored(g, deleting)
		g.Expect(deleting.Annotations).NotTo(HaveKey(HavePrefix(hook.PreTerminateHookPrefix)))
		before := deleting.DeepCopy()
		deleting.Finalizers = nil
		g.Expect(e.mgmt.direct.Patch(context.Background(), deleting, client.MergeFrom(before))).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(e.mgmt.direct.Get(context.Background(), client.ObjectKeyFromObject(deleting), &clusterv1.Machine{}))
		}, time.Minute, 100*time.Millisecond).Should(BeTrue())
		e.reconcile(g, cpe)
		g.Expect(removedIDs(e.backends.cluster)).To(Equal([]uint64{2}), "one remover only")
	})

	t.Run("Without the annotation both hooks wait for each other: the deadlock the annotation prevents", func(t *testing.T) {
		g := NewWithT(t)
		e := newReconcileEnv(t, g, "both", false)
		e.withKThreesControlPlane(g, nil)
		cpe := e.createCPE(g, "both", v1alpha1.ModeManage)
		e.createMachine(g, "cp-0", false)
		deleting := deletingWithBothHooks(g, e)
		e.createMachine(g, "cp-2", false)
		e.backends.cluster.ObserveResponse = healthySnapshot(3)
		provider := e.providerSide(e.backends.cluster)

		e.firstPass(g, cpe)
		for range 3 {
			e.reconcile(g, cpe)
			o := provider.step(g, deleting.Name)
			g.Expect(o.Phase).To(Equal(hook.PhaseWaitingForHooks))
		}
		e.stored(g, cpe)
		g.Expect(conditions.Get(cpe, v1alpha1.ProgressingCondition)).To(HaveValue(HaveField("Message", ContainSubstring(k3sProviderHook.Key))))
		e.stored(g, deleting)
		g.Expect(deleting.Annotations).To(And(HaveKey(v1alpha1.PreTerminateHookAnnotation), HaveKey(k3sProviderHook.Key)))
		g.Expect(removedIDs(e.backends.cluster)).To(BeEmpty())
	})
}
