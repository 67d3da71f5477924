package manager

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
)

// TestCache_trimsWorkerMachines creates a control-plane Machine, an etcdadm etcd Machine and a
// MachineDeployment's worker Machine, each with a spec, a status, labels and annotations, and
// reads them through a cache built with the manager's own cache options: the control-plane and
// etcd Machines come back whole (without managed fields), the worker Machine with its identity
// and labels only, so label selectors still select as the apiserver does.
func TestCache_trimsWorkerMachines(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := createNamespace(ctx, g)

	cp := createMachine(ctx, g, ns, "cp-0", map[string]string{clusterv1.MachineControlPlaneLabel: ""})
	etcd := createMachine(ctx, g, ns, "etcd-0", map[string]string{backends.EtcdClusterLabel: "fleet-etcd"})
	worker := createMachine(ctx, g, ns, "md-0-x-0", map[string]string{
		clusterv1.MachineDeploymentNameLabel: "md-0", clusterv1.MachineSetNameLabel: "md-0-x", "node-pool": "general",
	})

	o, _, _ := testOptions(g)
	scheme := Scheme()
	opts := cacheOptions(scheme, o)
	// Note: the manager gives its cache its own scheme (ctrl.Options.Scheme); so does this test.
	opts.Scheme = scheme
	c, err := cache.New(mgmt.Config, opts)
	g.Expect(err).NotTo(HaveOccurred())
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(runCtx) }()
	t.Cleanup(func() {
		stop()
		g.Expect(<-done).To(Succeed())
	})

	// The worker Machine keeps what tells it is not one etcd-adapter reads, and nothing else.
	g.Eventually(func(g Gomega) {
		live, cached := &clusterv1.Machine{}, &clusterv1.Machine{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(worker), live)).To(Succeed())
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(worker), cached)).To(Succeed())
		g.Expect(cached.ResourceVersion).To(Equal(live.ResourceVersion))
		g.Expect(cached.UID).To(Equal(live.UID))
		g.Expect(cached.Labels).To(Equal(live.Labels))
		g.Expect(cached.Annotations).To(BeEmpty())
		g.Expect(cached.ManagedFields).To(BeEmpty())
		g.Expect(cached.Finalizers).To(BeEmpty())
		g.Expect(cached.Spec).To(Equal(clusterv1.MachineSpec{}))
		g.Expect(cached.Status).To(Equal(clusterv1.MachineStatus{}))
	}).WithTimeout(time.Minute).Should(Succeed())

	// The control-plane and etcd Machines are cached as the apiserver serves them but for their
	// managed fields (compared until both agree: Cluster API's Machine controller may write them).
	for _, m := range []*clusterv1.Machine{cp, etcd} {
		g.Eventually(func(g Gomega) {
			live, cached := &clusterv1.Machine{}, &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), live)).To(Succeed())
			g.Expect(live.ManagedFields).NotTo(BeEmpty())
			live.ManagedFields = nil
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(m), cached)).To(Succeed())
			// Note: the cache sets the kind on what it returns, the client does not.
			cached.TypeMeta = metav1.TypeMeta{}
			g.Expect(cached).To(Equal(live))
			g.Expect(cached.Spec.ProviderID).To(Equal("test://" + m.Name))
			g.Expect(cached.Status.NodeRef.Name).To(Equal("node-" + m.Name))
			g.Expect(cached.Annotations).To(HaveKey("example.com/owner"))
		}).WithTimeout(time.Minute).Should(Succeed(), "Machine %s", m.Name)
	}

	// Label selectors select from the cache as from the apiserver.
	selections := []struct {
		opts []client.ListOption
		want []string
	}{
		{[]client.ListOption{client.MatchingLabels{clusterv1.ClusterNameLabel: "fleet"}}, []string{"cp-0", "etcd-0", "md-0-x-0"}},
		{[]client.ListOption{client.MatchingLabels{clusterv1.ClusterNameLabel: "fleet"}, client.HasLabels{clusterv1.MachineControlPlaneLabel}}, []string{"cp-0"}},
		{[]client.ListOption{client.MatchingLabels{backends.EtcdClusterLabel: "fleet-etcd"}}, []string{"etcd-0"}},
		{[]client.ListOption{client.MatchingLabels{"node-pool": "general"}}, []string{"md-0-x-0"}},
	}
	for _, s := range selections {
		list := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, list, append(s.opts, client.InNamespace(ns))...)).To(Succeed())
		var names []string
		for _, m := range list.Items {
			names = append(names, m.Name)
		}
		g.Expect(names).To(ConsistOf(s.want), "selection %v", s.opts)
	}

	// Other objects are cached without their managed fields, which nothing reads.
	cpe := &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: "fleet", Backend: v1alpha1.BackendK3s, Mode: v1alpha1.ModeObserve},
	}
	g.Expect(mgmt.Client.Create(ctx, cpe)).To(Succeed())
	g.Expect(cpe.ManagedFields).NotTo(BeEmpty())
	g.Eventually(func(g Gomega) {
		cached := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cpe), cached)).To(Succeed())
		g.Expect(cached.UID).To(Equal(cpe.UID))
		g.Expect(cached.ManagedFields).To(BeEmpty())
	}).Should(Succeed())
}

// createMachine creates a kubeadm-bootstrapped Machine of Cluster "fleet" (which does not exist,
// so Cluster API's Machine controller leaves it alone) with the given labels added to the cluster
// name label, annotations, a spec and a status (Node, addresses) as Cluster API writes them.
func createMachine(ctx context.Context, g Gomega, ns, name string, labels map[string]string) *clusterv1.Machine {
	labels[clusterv1.ClusterNameLabel] = "fleet"
	annotations := map[string]string{"example.com/owner": "team-a"}
	for i := range 10 {
		annotations[fmt.Sprintf("example.com/note-%d", i)] = fmt.Sprintf("a note of some length about Machine %s, number %d", name, i)
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
		Spec: clusterv1.MachineSpec{
			ClusterName: "fleet",
			// Note: kubeadm-bootstrapped, as KubeadmControlPlane's Machines, so the Machine hook
			// webhook (fail-closed, not served in this test) is not called for the control-plane one.
			Bootstrap: clusterv1.Bootstrap{
				ConfigRef:      clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: name},
				DataSecretName: new(name + "-bootstrap"),
			},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infra.Group, Kind: infra.MachineKind, Name: name,
			},
			ProviderID: "test://" + name,
			Version:    "v1.34.2",
		},
	}
	g.Expect(mgmt.Client.Create(ctx, m)).To(Succeed())
	m.Status = clusterv1.MachineStatus{
		NodeRef: clusterv1.MachineNodeReference{Name: "node-" + name},
		Addresses: clusterv1.MachineAddresses{
			{Type: clusterv1.MachineInternalIP, Address: "10.0.0.1"}, {Type: clusterv1.MachineHostName, Address: name},
		},
	}
	g.Expect(mgmt.Client.Status().Update(ctx, m)).To(Succeed())
	return m
}
