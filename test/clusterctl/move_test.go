package clusterctl

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// TestClusterctlMove moves a K3s Cluster with its ControlPlaneEtcd and its hooked control-plane
// Machines from one management cluster to another with `clusterctl move`, both with etcd-adapter
// installed by clusterctl and running, while one of the workload's three etcd members is
// stopped. Deleting a second Machine's member would lose quorum, so the source's quorum guard
// refuses any such deletion, except the ones clusterctl move makes (annotation
// clusterctl.cluster.x-k8s.io/delete-for-move): the move completes, the source keeps nothing,
// no member is removed, the moved Machines keep their hook, and the target's etcd-adapter takes
// the Cluster over (its ControlPlaneEtcd reports the members, one unhealthy).
func TestClusterctlMove(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r := newRepository(t, "v0.1.0")
	k := startK3s(ctx, t) // stopped last, after the management clusters that watch it
	source := startManagement(ctx, t, r)
	target := startManagement(ctx, t, r)
	for _, m := range []*management{source, target} {
		r.install(ctx, t, m, "v0.1.0")
		m.runManager(ctx, t, nil)
	}

	ns := createNamespace(ctx, g, source, "move")
	c, machines := registerK3s(ctx, g, source, k, ns, "k3s")
	g.Eventually(func(g Gomega) []string { return hooked(ctx, g, source.Client, ns) }, time.Minute).Should(HaveLen(len(machines)))
	// clusterctl move only moves a Cluster whose Machines have their Node (checkProvisioningCompleted).
	g.Eventually(func(g Gomega) {
		for _, machine := range machines {
			got := &clusterv1.Machine{}
			g.Expect(source.Client.Get(ctx, client.ObjectKeyFromObject(machine), got)).To(Succeed())
			g.Expect(got.Status.NodeRef.IsDefined()).To(BeTrue(), "Machine %s has its Node", machine.Name)
		}
	}, time.Minute).Should(Succeed())

	down := k.Etcd.MemberOnNode(k.Nodes[2])
	g.Expect(k.Etcd.StopMember(ctx, down.Name())).To(Succeed())
	g.Eventually(func(g Gomega) int32 { return healthyMembers(ctx, g, source.Client, ns, c.Name) }, time.Minute).Should(BeEquivalentTo(2))

	// The guard is on: outside a move, deleting a healthy Machine now would lose quorum.
	err := source.Client.Delete(ctx, machines[0].DeepCopy(), client.DryRunAll)
	g.Expect(err).To(MatchError(ContainSubstring("quorum")), "the source's quorum guard refuses a plain deletion")

	err = r.client(ctx, t).Move(ctx, clusterctlclient.MoveOptions{FromKubeconfig: source.Kubeconfig, ToKubeconfig: target.Kubeconfig, Namespace: ns})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(source.Client.Get(ctx, client.ObjectKeyFromObject(c), &clusterv1.Cluster{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(source.Client.Get(ctx, client.ObjectKeyFromObject(c), &v1alpha1.ControlPlaneEtcd{})).To(Satisfy(apierrors.IsNotFound))
	g.Eventually(func(g Gomega) []clusterv1.Machine {
		list := &clusterv1.MachineList{}
		g.Expect(source.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		return list.Items
	}, time.Minute).Should(BeEmpty(), "nothing on the source is held by the hook or refused by the quorum guard")

	moved := &clusterv1.Cluster{}
	g.Expect(target.Client.Get(ctx, client.ObjectKeyFromObject(c), moved)).To(Succeed())
	g.Expect(moved.Spec.Paused).To(Or(BeNil(), HaveValue(BeFalse())), "clusterctl move resumes the Cluster on the target")
	// clusterctl creates the objects without their status; Cluster API's Cluster controller,
	// which does not run here, would set it again from the control plane.
	g.Expect(env.MarkInitialized(ctx, target.Client, moved)).To(Succeed())
	g.Expect(hooked(ctx, g, target.Client, ns)).To(ConsistOf(names(machines)), "the moved Machines keep the hook")
	g.Eventually(func(g Gomega) {
		cpe := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(target.Client.Get(ctx, client.ObjectKeyFromObject(c), cpe)).To(Succeed())
		g.Expect(cpe.Status.MemberCount).To(HaveValue(BeEquivalentTo(3)))
		g.Expect(cpe.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(2)))
	}, time.Minute).Should(Succeed(), "the target's etcd-adapter reports the moved Cluster")

	members, err := k.Etcd.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(members).To(HaveLen(3), "the move removed no etcd member")
}

func names(machines []*clusterv1.Machine) []string {
	var out []string
	for _, m := range machines {
		out = append(out, m.Name)
	}
	return out
}
