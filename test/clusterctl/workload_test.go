package clusterctl

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// startK3s starts a 3-server K3s-flavoured workload cluster (the K3s simulator over a real etcd
// cluster), closed when t ends.
func startK3s(ctx context.Context, t *testing.T) *workload.K3s {
	t.Helper()
	k, err := workload.StartK3s(ctx, workload.K3sOptions{Members: 3, Tick: 200 * time.Millisecond})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { NewWithT(t).Expect(k.Close()).To(Succeed()) })
	return k
}

// registerK3s registers k as Cluster ns/name in m with a ControlPlaneEtcd in Manage mode and a
// control-plane Machine per Node (created through the Machine hook webhook), and returns them.
func registerK3s(ctx context.Context, g Gomega, m *management, k *workload.K3s, ns, name string) (*clusterv1.Cluster, []*clusterv1.Machine) {
	c, err := env.RegisterCluster(ctx, m.Client, env.ClusterInput{Namespace: ns, Name: name, Workload: k.APIServer.Config})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Client.Create(ctx, newControlPlaneEtcd(c))).To(Succeed())
	wl, err := client.New(k.APIServer.Config, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	var machines []*clusterv1.Machine
	for _, node := range k.Nodes {
		providerID := fmt.Sprintf("test://%s/%s", name, node)
		n := &corev1.Node{}
		g.Expect(wl.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
		before := n.DeepCopy()
		n.Spec.ProviderID = providerID
		g.Expect(wl.Patch(ctx, n, client.MergeFrom(before))).To(Succeed())
		machine, err := env.CreateControlPlaneMachine(ctx, m.Client, env.MachineInput{Cluster: c, Name: name + "-" + node, ProviderID: providerID})
		g.Expect(err).NotTo(HaveOccurred())
		machines = append(machines, machine)
	}
	return c, machines
}

// healthyMembers returns the ControlPlaneEtcd's status.healthyVoters (-1 when unset).
func healthyMembers(ctx context.Context, g Gomega, c client.Client, ns, name string) int32 {
	cpe := &v1alpha1.ControlPlaneEtcd{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cpe)).To(Succeed())
	if cpe.Status.HealthyVoters == nil {
		return -1
	}
	return *cpe.Status.HealthyVoters
}

// hooked returns the names of the Machines of ns that carry etcd-adapter's hook.
func hooked(ctx context.Context, g Gomega, c client.Client, ns string) []string {
	list := &clusterv1.MachineList{}
	g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var names []string
	for _, m := range list.Items {
		if _, ok := m.Annotations[v1alpha1.PreTerminateHookAnnotation]; ok {
			names = append(names, m.Name)
		}
	}
	return names
}

// withMemberCondition returns the names of the namespace's Machines that carry etcd-adapter's
// EtcdAdapterMemberHealthy condition.
func withMemberCondition(ctx context.Context, g Gomega, c client.Client, ns string) []string {
	list := &clusterv1.MachineList{}
	g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var names []string
	for i := range list.Items {
		if conditions.Has(&list.Items[i], v1alpha1.MemberHealthyMachineCondition) {
			names = append(names, list.Items[i].Name)
		}
	}
	return names
}
