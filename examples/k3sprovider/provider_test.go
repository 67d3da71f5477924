package k3sprovider_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/examples/k3sprovider"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

var ownHook = hook.Hook{Key: hook.PreTerminateHookPrefix + "/k3s-provider", Value: "k3s-provider"}

func newProvider(g Gomega) *k3sprovider.Provider {
	backend, err := k3s.New(k3s.Config{Client: k8sClient})
	g.Expect(err).NotTo(HaveOccurred())
	return &k3sprovider.Provider{Client: k8sClient, Etcd: backend, Hook: ownHook,
		ControlPlane: hook.ControlPlane{Kind: "KThreesControlPlane", Version: "v1.34.2+k3s1", EmbeddedRemovalHook: ownHook.Key}}
}

// A rollout replaces the Machine whose member is broken: the preflight leaves that Machine out,
// so its own broken member does not block it, while scaling down a healthy Machine beside it is
// refused. The provider's own v1beta1 conditions say which member is broken, with a severity.
func TestScaleDown(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ss := servers("sd", 3)
	createServers(t, ss, "sd-2")
	p := newProvider(g)

	ms := machines(g, ss)
	o := p.Observe(ctx, ms)
	g.Expect(o.Err).NotTo(HaveOccurred())
	cp := &kthreesControlPlane{}
	sink := k3sprovider.ConditionSink{ControlPlane: cp, Machines: map[string]*clusterv1.Machine{}}
	for i := range ms {
		sink.Machines[ms[i].Name] = &ms[i]
	}
	k3sprovider.WriteConditions(o, sink)
	g.Expect(conditions.Get(cp, "EtcdClusterHealthyCondition")).To(PointTo(MatchFields(IgnoreExtras, Fields{
		"Status": Equal(corev1.ConditionFalse), "Reason": Equal("EtcdClusterUnhealthy"), "Severity": Equal(clusterv1.ConditionSeverityError)})))
	g.Expect(conditions.Get(sink.Machines["m-sd-2"], "EtcdMemberHealthy")).To(PointTo(MatchFields(IgnoreExtras, Fields{
		"Status": Equal(corev1.ConditionFalse), "Reason": Equal("EtcdMemberUnhealthy"), "Severity": Equal(clusterv1.ConditionSeverityError)})))
	g.Expect(conditions.IsTrue(sink.Machines["m-sd-0"], "EtcdMemberHealthy")).To(BeTrue())
	g.Expect(conditions.GetReason(sink.Machines["m-sd-0"], "EtcdMemberHealthy")).To(BeEmpty(), "True with no reason, as cluster-api-k3s's conditions.MarkTrue writes it")

	refused, err := p.ScaleDown(ctx, o, ms, "m-sd-0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refused.Deleted).To(BeFalse())
	g.Expect(refused.Reason).To(Equal("EtcdPreflightFailed"))
	g.Expect(refused.Message).To(ContainSubstring("sd-2"))
	g.Expect(machine(g, "m-sd-0").DeletionTimestamp.IsZero()).To(BeTrue())

	done, err := p.ScaleDown(ctx, o, ms, "m-sd-2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done).To(Equal(k3sprovider.ScaleDownResult{Deleted: true}))
	g.Expect(machine(g, "m-sd-2").DeletionTimestamp.IsZero()).To(BeFalse())

	again, err := p.ScaleDown(ctx, p.Observe(ctx, machines(g, ss)), machines(g, ss), "m-sd-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Reason).To(Equal("DeletionInProgress"), "one Machine at a time")
}

// A MachineHealthCheck marked two Machines: deleting the one with the broken member keeps a
// healthy majority; deleting a healthy one beside it would leave one healthy voter of two.
func TestMayRemediate(t *testing.T) {
	g := NewWithT(t)
	ss := servers("rm", 3)
	createServers(t, ss, "rm-2")
	p := newProvider(g)
	o := p.Observe(context.Background(), machines(g, ss))

	ok, why := k3sprovider.MayRemediate(o, "m-rm-2")
	g.Expect(ok).To(BeTrue(), why)
	ok, why = k3sprovider.MayRemediate(o, "m-rm-0")
	g.Expect(ok).To(BeFalse())
	g.Expect(why).To(HavePrefix("WouldLoseQuorum"))
}

// The Machine's member is removed only after Cluster API drained its Node, and the hook is
// released once K3s removed it. A removal K3s refuses keeps the hook and says so on the Machine
// until a person asks for a retry.
func TestReconcileDeletingMachine(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ss := servers("dl", 3)
	createServers(t, ss)
	p := newProvider(g)
	for _, m := range machines(g, ss) {
		placed, err := p.EnsureHook(ctx, &m)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(placed).To(BeTrue())
	}
	g.Expect(machine(g, "m-dl-2").Annotations).To(HaveKeyWithValue(ownHook.Key, ownHook.Value))

	g.Expect(k8sClient.Delete(ctx, machine(g, "m-dl-2"))).To(Succeed())
	out, err := p.ReconcileDeletingMachine(ctx, machine(g, "m-dl-2"), machines(g, ss))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Phase).To(Equal(hook.PhaseWaitingForDrain))
	g.Expect(node(g, "dl-2").Annotations).NotTo(HaveKey(keys.Remove), "nothing is asked of K3s before the drain")

	markDrained(g, "m-dl-2")
	step := func(reject ...string) hook.Outcome {
		out, err := p.ReconcileDeletingMachine(ctx, machine(g, "m-dl-2"), machines(g, ss))
		g.Expect(err).NotTo(HaveOccurred())
		answerRemovals(g, reject...)
		return out
	}
	g.Eventually(func() hook.Phase { return step("dl-2").Phase }, time.Minute, 100*time.Millisecond).Should(Equal(hook.PhaseRejected))
	g.Expect(machine(g, "m-dl-2").Annotations).To(And(HaveKey(ownHook.Key), HaveKey(hook.RemovalRejectedAnnotation)))
	g.Expect(node(g, "dl-2").Annotations).To(HaveKeyWithValue(keys.NodeName, "dl-2-1a2b3c4d"), "the member is still there")

	m := machine(g, "m-dl-2")
	m.Annotations[hook.RetryRemovalAnnotation] = hook.AnnotationTrue
	g.Expect(k8sClient.Update(ctx, m)).To(Succeed())
	g.Eventually(func() bool { return step().Done() }, time.Minute, 100*time.Millisecond).Should(BeTrue())
	g.Expect(node(g, "dl-2").Annotations).To(HaveKeyWithValue(keys.RemovedNodeName, "dl-2-1a2b3c4d"))
	g.Expect(machine(g, "m-dl-2").Annotations).NotTo(Or(HaveKey(ownHook.Key), HaveKey(hook.RemovalRejectedAnnotation), HaveKey(hook.RetryRemovalAnnotation)))

	forget(machine(g, "m-dl-2"))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: "m-dl-2"}, &clusterv1.Machine{}))
	}, 30*time.Second).Should(BeTrue())
}
