package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

var _ = Describe("One ControlPlaneEtcd per Cluster", func() {
	It("adds no default next to one a person made under another name, and a second one for the same Cluster does nothing but say so", func(ctx SpecContext) {
		By("a person's ControlPlaneEtcd made before its K3s Cluster: no default twin appears")
		ns := createNamespace(ctx)
		mine := &v1alpha1.ControlPlaneEtcd{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"},
			Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: "planned", Backend: v1alpha1.BackendK3s, Mode: v1alpha1.ModeObserve},
		}
		Expect(mgmt.Client.Create(ctx, mine)).To(Succeed())
		planned := &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planned"},
			Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KThreesControlPlane", Name: "planned"}},
		}
		Expect(mgmt.Client.Create(ctx, planned)).To(Succeed())
		// The creation controller answers a new Cluster within a second or two; ten quiet
		// seconds show it decided not to add one.
		Consistently(func() []string { return controlPlaneEtcdNames(ctx, ns) }, 10*time.Second, time.Second).Should(ConsistOf("mine"))

		By("a second ControlPlaneEtcd in Manage mode for a running K3s Cluster")
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		twin := &v1alpha1.ControlPlaneEtcd{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.cpe.Namespace, Name: "twin"},
			Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: c.cluster.Name, Backend: v1alpha1.BackendK3s, Mode: v1alpha1.ModeManage,
				ObservationInterval: &metav1.Duration{Duration: observationInterval}},
		}
		Expect(mgmt.Client.Create(ctx, twin)).To(Succeed())
		Eventually(func(g Gomega) {
			got := &v1alpha1.ControlPlaneEtcd{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(twin), got)).To(Succeed())
			for _, t := range []string{v1alpha1.AvailableCondition, v1alpha1.DegradedCondition, v1alpha1.ProgressingCondition, v1alpha1.EtcdClusterHealthyCondition} {
				cond := findCondition(got, t)
				g.Expect(cond).NotTo(BeNil(), "condition %s", t)
				g.Expect(cond.Reason).To(Equal(v1alpha1.DuplicateReason))
				g.Expect(cond.Message).To(ContainSubstring(c.cpe.Name))
			}
		}, reconcileTimeout).Should(Succeed())
		// Note: the recorder writes the Event asynchronously, after the pass whose conditions
		// were awaited above.
		Eventually(func() []string { return eventReasons(ctx, twin.Namespace, twin.Name) }, reconcileTimeout).Should(ContainElement(v1alpha1.EventDuplicate))

		By("deleting a Machine: the one in charge removes its member; the twin records nothing")
		var doomed *clusterv1.Machine
		for _, m := range c.machines {
			doomed = m
			break
		}
		Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed())
		c.expectGone(ctx, doomed)
		c.expectMembers(ctx, 2)
		c.expectRemoved(ctx, doomed)
		got := &v1alpha1.ControlPlaneEtcd{}
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(twin), got)).To(Succeed())
		Expect(got.Status.Removal).To(BeNil(), "a duplicate runs no removal flow")
		Expect(got.Status.Members).To(BeEmpty(), "a duplicate observes nothing")
	}, SpecTimeout(5*time.Minute))

	It("keeps the etcd backend of the one in charge when a duplicate is deleted", func(ctx SpecContext) {
		By("a kubeadm Cluster in Observe mode (KCP's default), whose backend the quorum guard shares")
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeObserve)
		c.expectMembers(ctx, 3)
		inUse, err := adapter.backends.For(ctx, c.cluster, v1alpha1.BackendKubeadm)
		Expect(err).NotTo(HaveOccurred())

		By("a duplicate ControlPlaneEtcd, reconciled against the same Cluster, then deleted as its condition asks")
		twin := &v1alpha1.ControlPlaneEtcd{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.cpe.Namespace, Name: "twin"},
			Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: c.cluster.Name, Backend: v1alpha1.BackendKubeadm, Mode: v1alpha1.ModeObserve},
		}
		Expect(mgmt.Client.Create(ctx, twin)).To(Succeed())
		Eventually(func(g Gomega) {
			got := &v1alpha1.ControlPlaneEtcd{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(twin), got)).To(Succeed())
			g.Expect(findCondition(got, v1alpha1.AvailableCondition)).To(HaveField("Reason", v1alpha1.DuplicateReason))
		}, reconcileTimeout).Should(Succeed())
		Expect(mgmt.Client.Delete(ctx, twin)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(twin), &v1alpha1.ControlPlaneEtcd{}))
		}, reconcileTimeout).Should(BeTrue())

		By("the backend in use stays open and is still the one handed out")
		// The deletion's pass runs within a second of the object going; a closed backend answers
		// every call with an error from then on.
		Consistently(func(g Gomega) {
			obsCtx, cancel := context.WithTimeout(ctx, observeTimeout)
			defer cancel()
			_, err := inUse.Observe(obsCtx)
			g.Expect(err).NotTo(HaveOccurred(), "the backend the one in charge and the guard use must not be closed")
			now, err := adapter.backends.For(ctx, c.cluster, v1alpha1.BackendKubeadm)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(now).To(BeIdenticalTo(inUse))
		}, 10*time.Second, time.Second).Should(Succeed())
	}, SpecTimeout(5*time.Minute))
})

func controlPlaneEtcdNames(ctx context.Context, namespace string) []string {
	list := &v1alpha1.ControlPlaneEtcdList{}
	Expect(mgmt.Client.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	var out []string
	for _, c := range list.Items {
		out = append(out, c.Name)
	}
	return out
}
