package clusterctl

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// TestClusterctlDelete uninstalls the addon in the order docs/operations.md gives ("Handing a
// Cluster back, and uninstalling"): every ControlPlaneEtcd to Observe and its Cluster opted out,
// wait until the running manager has taken its hook off every Machine, delete the
// ControlPlaneEtcds and wait until the running manager has taken EtcdAdapterMemberHealthy off
// every Machine, stop the manager, then `clusterctl delete --addon etcd-adapter --include-crd`.
// Afterwards the CRD and the ControlPlaneEtcds, the webhook configurations, the Deployment and
// the inventory entry are gone, every Machine is still there without the hook or the condition,
// and deleting a control-plane Machine is not held by anything of etcd-adapter's: Cluster API
// deletes it.
func TestClusterctlDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r := newRepository(t, "v0.1.0")
	k := startK3s(ctx, t) // stopped last, after the management cluster that watches it
	m := startManagement(ctx, t, r)
	r.install(ctx, t, m, "v0.1.0")
	m.runManager(ctx, t, nil)
	ns := createNamespace(ctx, g, m, "uninstall")
	c, machines := registerK3s(ctx, g, m, k, ns, "k3s")
	g.Eventually(func(g Gomega) []string { return hooked(ctx, g, m.Client, ns) }, time.Minute).Should(HaveLen(len(machines)))

	g.Eventually(func(g Gomega) []string { return withMemberCondition(ctx, g, m.Client, ns) }, time.Minute).Should(HaveLen(len(machines)))

	// 1. Observe everywhere, and opt the Clusters out so that none gets a ControlPlaneEtcd again.
	cpes := &v1alpha1.ControlPlaneEtcdList{}
	g.Expect(m.Client.List(ctx, cpes)).To(Succeed())
	g.Expect(cpes.Items).NotTo(BeEmpty())
	for i := range cpes.Items {
		cpe := &cpes.Items[i]
		before := cpe.DeepCopy()
		cpe.Spec.Mode = v1alpha1.ModeObserve
		g.Expect(m.Client.Patch(ctx, cpe, client.MergeFrom(before))).To(Succeed())
		cluster := &clusterv1.Cluster{}
		g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: cpe.Namespace, Name: cpe.Spec.ClusterName}, cluster)).To(Succeed())
		beforeCluster := cluster.DeepCopy()
		if cluster.Annotations == nil {
			cluster.Annotations = map[string]string{}
		}
		cluster.Annotations[v1alpha1.OptOutAnnotation] = v1alpha1.AnnotationTrue
		g.Expect(m.Client.Patch(ctx, cluster, client.MergeFrom(beforeCluster))).To(Succeed())
	}
	// 2. Wait until no Machine carries the hook.
	g.Eventually(func(g Gomega) []string { return hooked(ctx, g, m.Client, ns) }, time.Minute).Should(BeEmpty())
	// 3. Delete the ControlPlaneEtcds: clusterctl delete --include-crd refuses while objects of
	// the provider's CRDs exist (clusterctl's cluster/components.go), and 4. wait until the
	// running manager has taken EtcdAdapterMemberHealthy off every Machine.
	g.Expect(m.Client.DeleteAllOf(ctx, &v1alpha1.ControlPlaneEtcd{}, client.InNamespace(ns))).To(Succeed())
	g.Eventually(func(g Gomega) []string { return withMemberCondition(ctx, g, m.Client, ns) }, time.Minute).Should(BeEmpty())
	// 5. Stop the manager (scale the Deployment to 0).
	d := &appsv1.Deployment{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: deploymentName}, d)).To(Succeed())
	before := d.DeepCopy()
	d.Spec.Replicas = new(int32(0))
	g.Expect(m.Client.Patch(ctx, d, client.MergeFrom(before))).To(Succeed())
	m.stopManager(t)
	// 6. Remove the webhooks' configurations, the Deployment, the inventory entry and the CRD.
	err := r.client(ctx, t).Delete(ctx, clusterctlclient.DeleteOptions{
		Kubeconfig:     m.Kubeconfig,
		AddonProviders: []string{addon},
		IncludeCRDs:    true,
	})
	g.Expect(err).NotTo(HaveOccurred())

	g.Eventually(func() error {
		return m.Client.Get(ctx, client.ObjectKey{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{})
	}, time.Minute).Should(Satisfy(apierrors.IsNotFound), "the CRD is deleted, and with it every ControlPlaneEtcd (they carry no finalizer)")
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Name: validatingName}, &admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Name: mutatingName}, &admissionregistrationv1.MutatingWebhookConfiguration{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: deploymentName}, &appsv1.Deployment{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(inventory(ctx, g, m)).To(BeEmpty())
	for _, machine := range machines {
		got := &clusterv1.Machine{}
		g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(machine), got)).To(Succeed(), "uninstalling removes no Machine")
		g.Expect(got.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation))
		g.Expect(conditions.Has(got, v1alpha1.MemberHealthyMachineCondition)).To(BeFalse())
	}

	// Nothing stuck: a control-plane Machine deleted now goes (Cluster API drains its Node and
	// deletes it), held by no hook and refused by no webhook.
	g.Expect(m.Client.Delete(ctx, machines[0])).To(Succeed())
	g.Eventually(func() error {
		return m.Client.Get(ctx, client.ObjectKeyFromObject(machines[0]), &clusterv1.Machine{})
	}, time.Minute).Should(Satisfy(apierrors.IsNotFound))
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(c), &clusterv1.Cluster{})).To(Succeed())
}
