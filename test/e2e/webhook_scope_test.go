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

	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
)

// The Machine hook webhook has failurePolicy Fail, so while no etcd-adapter replica serves it
// every control-plane Machine it is called for is refused. Its matchCondition keeps Machines
// bootstrapped by a KubeadmConfig (KubeadmControlPlane's, whose Clusters etcd-adapter only
// observes) away from it, so KCP never waits on etcd-adapter. The etcd Machines of an
// EtcdadmCluster reach it through a second entry with failurePolicy Ignore, so they never wait on
// etcd-adapter either.
var _ = Describe("The Machine hook webhook's scope", func() {
	It("lets a KubeadmControlPlane Machine and an etcdadm etcd Machine be created while no etcd-adapter webhook server runs, and refuses a K3s one", func(ctx SpecContext) {
		By("stopping etcd-adapter: no webhook server answers")
		Expect(adapter.Stop()).To(Succeed())
		DeferCleanup(func() error {
			// Later specs need the whole etcd-adapter, also when this one failed half way.
			if adapter.Running() {
				return nil
			}
			var err error
			adapter, err = startAdapter(context.Background(), mgmt, nil)
			return err
		})
		ns := createNamespace(ctx)

		By("creating a control-plane Machine bootstrapped by a KubeadmConfig, as KubeadmControlPlane creates it")
		kcp := scopedMachine(ns, "m-kubeadm", "bootstrap.cluster.x-k8s.io", "KubeadmConfig")
		Expect(mgmt.Client.Create(ctx, kcp)).To(Succeed(), "a KubeadmControlPlane Machine must not depend on etcd-adapter's webhook")
		DeferCleanup(deleteScopedMachine, kcp)
		Expect(kcp.Annotations).NotTo(HaveKey(ContainSubstring("etcd-adapter")))

		By("creating an etcd Machine as the etcdadm controller creates it (label cluster.x-k8s.io/etcd-cluster, no control-plane label): its webhook entry is ignored when it cannot be called")
		em := scopedMachine(ns, "m-etcdadm", "bootstrap.cluster.x-k8s.io", "EtcdadmConfig")
		delete(em.Labels, clusterv1.MachineControlPlaneLabel)
		em.Labels[backends.EtcdClusterLabel] = "scope-etcd"
		Expect(mgmt.Client.Create(ctx, em)).To(Succeed(), "an etcd Machine must not depend on etcd-adapter's webhook")
		DeferCleanup(deleteScopedMachine, em)
		Expect(em.Annotations).NotTo(HaveKey(ContainSubstring("etcd-adapter")))

		By("creating a control-plane Machine bootstrapped by a KThreesConfig: the webhook is called and cannot answer, so the Machine is refused")
		k3s := scopedMachine(ns, "m-k3s", "bootstrap.cluster.x-k8s.io", "KThreesConfig")
		err := mgmt.Client.Create(ctx, k3s)
		Expect(err).To(HaveOccurred(), "a K3s Machine must not be created without the webhook deciding on its hook")
		Expect(err.Error()).To(ContainSubstring("etcd-hook.etcdadapter.cluster.x-k8s.io"))
		Expect(apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(k3s), &clusterv1.Machine{}))).To(BeTrue())
	}, SpecTimeout(2*time.Minute))
})

// scopedMachine is a control-plane Machine whose bootstrap config is of the given kind. Its
// Cluster, bootstrap config and infrastructure Machine are never created: only admission is
// under test.
func scopedMachine(ns, name, bootstrapGroup, bootstrapKind string) *clusterv1.Machine {
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name,
			Labels: map[string]string{
				clusterv1.ClusterNameLabel:         "scope",
				clusterv1.MachineControlPlaneLabel: "",
			},
		},
		Spec: clusterv1.MachineSpec{
			ClusterName: "scope",
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapGroup,
				Kind:     bootstrapKind,
				Name:     name,
			}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infra.Group,
				Kind:     infra.MachineKind,
				Name:     name,
			},
		},
	}
}

// deleteScopedMachine deletes the Machine and takes off any finalizer Cluster API's Machine
// controller put on it: its Cluster and bootstrap config do not exist, so its deletion would
// not finish on its own.
func deleteScopedMachine(ctx context.Context, m *clusterv1.Machine) {
	Expect(client.IgnoreNotFound(mgmt.Client.Delete(ctx, m))).To(Succeed())
	Eventually(func(g Gomega) {
		got := &clusterv1.Machine{}
		err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)
		if apierrors.IsNotFound(err) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		if len(got.Finalizers) > 0 {
			before := got.DeepCopy()
			got.Finalizers = nil
			g.Expect(client.IgnoreNotFound(mgmt.Client.Patch(ctx, got, client.MergeFrom(before)))).To(Succeed())
		}
		g.Expect(apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{}))).To(BeTrue())
	}, reconcileTimeout).Should(Succeed())
}
