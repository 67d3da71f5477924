package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// kthreesControlPlane is cluster-api-k3s's control-plane kind.
var kthreesControlPlane = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KThreesControlPlane"}

var _ = Describe("A running KThreesControlPlane provider", func() {
	It("keeps its legacy k3s hook: etcd-adapter waits for the provider to release it before removing the member", func(ctx SpecContext) {
		installKThreesControlPlaneCRD(ctx)
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)

		By("making the Cluster's control plane a KThreesControlPlane that exists: its provider is still there to release its own hook")
		kcp := &unstructured.Unstructured{}
		kcp.SetGroupVersionKind(kthreesControlPlane)
		kcp.SetNamespace(c.cluster.Namespace)
		kcp.SetName(c.cluster.Name)
		Expect(mgmt.Client.Create(ctx, kcp)).To(Succeed())
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.cluster), c.cluster)).To(Succeed())
		before := c.cluster.DeepCopy()
		c.cluster.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: kthreesControlPlane.Group, Kind: kthreesControlPlane.Kind, Name: kcp.GetName()}
		Expect(mgmt.Client.Patch(ctx, c.cluster, client.MergeFrom(before))).To(Succeed())

		By("deleting a Machine that carries the provider's legacy hook: drained, then held by that hook; the member stays")
		doomed := c.machines["cp-2"]
		patchAnnotation(ctx, doomed, v1alpha1.LegacyK3sHookAnnotation, v1alpha1.LegacyK3sHookValue)
		createPod(ctx, c.workload.APIServer.Client, "cp-2")
		beforeIDs := memberIDs(ctx, c)
		Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed())
		Eventually(func(g Gomega) {
			cond := findCondition(c.status(ctx), v1alpha1.ProgressingCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Message).To(And(ContainSubstring("waits for pre-terminate hooks"), ContainSubstring(v1alpha1.LegacyK3sHookAnnotation)))
		}, deletionTimeout).Should(Succeed())
		Consistently(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(doomed), got)).To(Succeed())
			g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.LegacyK3sHookAnnotation, v1alpha1.LegacyK3sHookValue), "a hook its provider still releases is not adopted")
			g.Expect(got.Annotations).To(HaveKey(v1alpha1.PreTerminateHookAnnotation))
			g.Expect(memberIDs(ctx, c)).To(Equal(beforeIDs))
		}, 3*time.Second, time.Second).Should(Succeed())

		By("the provider releases its hook: etcd-adapter removes the member and releases its hook")
		got := &clusterv1.Machine{}
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(doomed), got)).To(Succeed())
		orig := got.DeepCopy()
		delete(got.Annotations, v1alpha1.LegacyK3sHookAnnotation)
		Expect(mgmt.Client.Patch(ctx, got, client.MergeFrom(orig))).To(Succeed())
		c.expectGone(ctx, doomed)
		c.expectMembers(ctx, 2)
	}, SpecTimeout(4*time.Minute))
})

// installKThreesControlPlaneCRD installs a CustomResourceDefinition for KThreesControlPlane
// (cluster-api-k3s's kind, without its schema) unless it is there, and waits until it is served.
func installKThreesControlPlaneCRD(ctx context.Context) {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "kthreescontrolplanes." + kthreesControlPlane.Group,
			Labels: map[string]string{"cluster.x-k8s.io/v1beta2": kthreesControlPlane.Version}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: kthreesControlPlane.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kthreesControlPlane.Kind, ListKind: kthreesControlPlane.Kind + "List",
				Plural: "kthreescontrolplanes", Singular: "kthreescontrolplane"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: kthreesControlPlane.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: new(true)}}}},
		},
	}
	if err := mgmt.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	Eventually(func(g Gomega) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(kthreesControlPlane.GroupVersion().WithKind(kthreesControlPlane.Kind + "List"))
		g.Expect(mgmt.Client.List(ctx, list)).To(Succeed())
	}, reconcileTimeout).Should(Succeed())
}
