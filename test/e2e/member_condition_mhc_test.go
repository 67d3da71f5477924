package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// Timings of the ControlPlaneEtcds of these specs: short, so that a spec sees the condition turn
// False within seconds; the defaults (2m and 1m) are for real clusters.
const (
	e2eMemberUnhealthyTimeout = 10 * time.Second
	e2eMemberRecoveryTime     = 5 * time.Second
)

// otherWriterCondition is a condition another controller owns on the Machine; etcd-adapter's
// patches must leave it alone.
const otherWriterCondition = "example.com/OtherWriter"

var _ = Describe("MachineHealthCheck remediating on EtcdAdapterMemberHealthy", func() {
	It("K3s: a Machine whose member is dead while its Node stays Ready is marked and remediated by the owner", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		remediateDeadMember(ctx, c, "cp-2", v1alpha1.BackendK3s)
	}, SpecTimeout(8*time.Minute))

	// Note: on kubeadm, where etcd-adapter asks every member itself. A K3s cluster that lost quorum
	// has no etcd leader to write EtcdIsVoter, so its Nodes keep the last verdict, trusted until
	// the heartbeat is stale (K3s re-writes it every 5m): etcd-adapter sees both members healthy
	// meanwhile, and on a real K3s the workload apiserver, stored in that etcd, stops answering.
	It("kubeadm: a second member dying meanwhile is not remediated: with 1 of 3 members healthy the quorum guard refuses the owner's deletions, even with no unhealthyLessThanOrEqualTo on the MachineHealthCheck", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		c.setMemberTimeouts(ctx)
		c.expectMemberConditions(ctx, metav1.ConditionTrue)
		createSampleMHC(ctx, c, withoutUnhealthyLimit)
		owner := startOwnerRemediation(ctx, c)
		before := memberIDs(ctx, c)

		By("cp-2's member dies, and cp-1's a moment later, before anything was remediated; their Nodes stay Ready")
		Expect(c.workload.Etcd.StopMember(ctx, c.workload.Etcd.MemberOnNode("cp-2").Name())).To(Succeed())
		Expect(c.workload.Etcd.StopMember(ctx, c.workload.Etcd.MemberOnNode("cp-1").Name())).To(Succeed())
		for _, node := range []string{"cp-1", "cp-2"} {
			m := c.machines[node]
			// Note: the MachineHealthCheck marks a Machine once its condition is False; the
			// condition of a member whose etcd lost quorum may instead be Unknown (K3s's leader
			// stops reporting), and then nothing is marked. Either way the quorum guard is what
			// keeps the member: asked directly, as the owner asks, it refuses.
			Eventually(func() string { return guardVerdict(ctx, m) }, reconcileTimeout).Should(
				Or(ContainSubstring("("+v1alpha1.MemberRemovalQuorumLostReason+")"), ContainSubstring("("+v1alpha1.MemberRemovalHealthUnknownReason+")")),
				"the quorum guard must refuse remediating Machine %s", m.Name)
		}
		Consistently(func(g Gomega) {
			for _, node := range []string{"cp-1", "cp-2"} {
				m := &clusterv1.Machine{}
				g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.machines[node]), m)).To(Succeed())
				g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "Machine %s must not be deleted while that would lose quorum", m.Name)
			}
		}, e2eMemberUnhealthyTimeout+20*time.Second, time.Second).Should(Succeed())
		Expect(serializableMemberIDs(ctx, c, "cp-0")).To(Equal(before), "no member was removed")
		By("the MachineHealthCheck marked the Machines (with quorum lost no member answers as healthy); the owner's deletion was refused")
		Eventually(func(g Gomega) {
			refusals := 0
			for _, node := range []string{"cp-0", "cp-1", "cp-2"} {
				if refusal, ok := owner.refusal(c.machines[node].Name); ok {
					g.Expect(refusal).To(Or(ContainSubstring("("+v1alpha1.MemberRemovalQuorumLostReason+")"), ContainSubstring("("+v1alpha1.MemberRemovalHealthUnknownReason+")")))
					refusals++
				}
			}
			g.Expect(refusals).To(BeNumerically(">", 0))
		}, reconcileTimeout).Should(Succeed(), "the owner must have tried a marked Machine and been refused")
		for _, node := range []string{"cp-0", "cp-1", "cp-2"} {
			if refusal, ok := owner.refusal(c.machines[node].Name); ok {
				AddReportEntry("kubeadm: the owner's remediation of "+node+" refused", refusal)
			}
		}
		Expect(serializableMemberIDs(ctx, c, "cp-0")).To(Equal(before), "no member was removed")
	}, SpecTimeout(6*time.Minute))

	// Note: a stacked etcd stores its own apiserver's data, so when quorum is lost the apiserver
	// stops serving (its reads are quorum reads) and etcd-adapter cannot observe etcd at all:
	// kubeadm's port-forward goes through it, and K3s's Node list is a consistent read. The test
	// environment's workload apiserver has an etcd of its own, so these specs stop it with the
	// second death, as stacked etcd does. The guard then decides on the status the controller
	// last wrote.
	It("kubeadm, stacked: a second member dying takes the workload apiserver with it; the quorum guard refuses deleting the other Machines on the last observation, and no member is removed", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		refuseOnLastObservation(ctx, c, "kubeadm", func(member string) error { return c.workload.Etcd.StopMember(ctx, member) })
	}, SpecTimeout(6*time.Minute))

	It("K3s, stacked: a second member dying takes the workload apiserver with it; the quorum guard refuses deleting the other Machines on the last observation, and no member is removed", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		refuseOnLastObservation(ctx, c, "K3s", func(member string) error {
			return c.workload.Simulator.Quiesced(func() error { return c.workload.Etcd.StopMember(ctx, member) })
		})
	}, SpecTimeout(6*time.Minute))

	// Note: removing a dead member never lowers etcd's margin (h healthy of n voters keep a
	// quorum of n-1 when they had one of n), so with quorum held the guard rightly lets the
	// owner remediate a second dead member, also while another remediation is under way; and a
	// second death in a 3-member cluster loses quorum by itself, with nothing left to commit a
	// removal. The remediation that would lose quorum is of a Machine whose member is healthy
	// while another member is dead, and a remediation under way does not make it safe.
	It("K3s: while one Machine is being remediated and another's member is dead, the remediation of a third is refused by the quorum guard, even with no unhealthyLessThanOrEqualTo; no member is removed and quorum holds", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		// memberUnhealthyTimeout stays at its default (2m): the dead member's Machine is not
		// marked during the spec, so the owner has only the third Machine to try.
		c.expectMemberConditions(ctx, metav1.ConditionTrue)
		createSampleMHC(ctx, c, withoutUnhealthyLimit, withNodeNetworkUnavailable)
		owner := startEagerOwnerRemediation(ctx, c)
		first, third := c.machines["cp-1"], c.machines["cp-0"]
		before := memberIDs(ctx, c)

		By("a Pod under a PodDisruptionBudget that allows no eviction holds the drain of cp-1, whose Node reports NetworkUnavailable: the MachineHealthCheck marks it and the owner deletes it; its member stays a healthy voter")
		holdDrain(ctx, c, "cp-1")
		setNodeCondition(ctx, c, "cp-1", corev1.NodeNetworkUnavailable, corev1.ConditionTrue)
		waitForDeletion(ctx, first)
		Expect(owner.refused()).To(BeEmpty(), "with every member healthy the first remediation is safe")

		By("cp-2's member dies while cp-1 is being remediated (2 of 3 members run, so the etcd leader's K3s reports it), then cp-0's Node reports NetworkUnavailable and the owner tries to remediate cp-0")
		dead := c.workload.Etcd.MemberOnNode("cp-2").Name()
		Expect(c.workload.Simulator.Quiesced(func() error { return c.workload.Etcd.StopMember(ctx, dead) })).To(Succeed())
		Eventually(func(g Gomega) {
			for _, mm := range c.status(ctx).Status.Members {
				if mm.Name == dead {
					g.Expect(mm.Health).To(Equal(v1alpha1.MemberUnhealthy))
				}
			}
		}, reconcileTimeout).Should(Succeed(), "etcd-adapter must see member %s dead", dead)
		setNodeCondition(ctx, c, "cp-0", corev1.NodeNetworkUnavailable, corev1.ConditionTrue)
		Eventually(func() string { r, _ := owner.refusal(third.Name); return r }, reconcileTimeout, 200*time.Millisecond).Should(
			ContainSubstring("("+v1alpha1.MemberRemovalWouldLoseQuorumReason+")"), "the owner must have tried %s and been refused", third.Name)
		refusal, _ := owner.refusal(third.Name)
		Expect(refusal).To(ContainSubstring("with the deletions of Machines "+first.Name+" already under way"), "the guard must count the remediation under way")
		Expect(refusal).To(ContainSubstring(dead+" (Unhealthy"), "the refusal names the dead member")
		AddReportEntry("K3s: the owner's remediation of cp-0 while cp-1 is being remediated and cp-2's member is dead, refused", refusal)

		Consistently(func(g Gomega) {
			m := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(third), m)).To(Succeed())
			g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "Machine %s must not be deleted while that would lose quorum", m.Name)
			g.Expect(memberIDsWith(ctx, g, c)).To(Equal(before), "no member is removed: cp-1's or cp-0's removal would leave one healthy member of two")
		}, 20*time.Second, time.Second).Should(Succeed())
	}, SpecTimeout(8*time.Minute))

	It("kubeadm: a Machine whose member is dead while its Node stays Ready is marked and remediated by the owner", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		remediateDeadMember(ctx, c, "cp-2", v1alpha1.BackendKubeadm)
	}, SpecTimeout(8*time.Minute))

	It("writes the condition in Observe mode too, and takes it off every Machine once a person opts the Cluster out and deletes its ControlPlaneEtcd", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeObserve)
		c.expectMemberConditions(ctx, metav1.ConditionTrue)
		setOtherWriterCondition(ctx, c.machines["cp-0"])

		cluster := c.cluster.DeepCopy()
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
		before := cluster.DeepCopy()
		if cluster.Annotations == nil {
			cluster.Annotations = map[string]string{}
		}
		cluster.Annotations[v1alpha1.OptOutAnnotation] = v1alpha1.AnnotationTrue
		Expect(mgmt.Client.Patch(ctx, cluster, client.MergeFrom(before))).To(Succeed())
		Expect(mgmt.Client.Delete(ctx, c.cpe)).To(Succeed())
		Eventually(func(g Gomega) {
			for _, m := range c.machines {
				got := &clusterv1.Machine{}
				g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
				g.Expect(conditions.Get(got, v1alpha1.MemberHealthyMachineCondition)).To(BeNil(), "Machine %s", m.Name)
				g.Expect(conditions.Get(got, clusterv1.ReadyCondition)).NotTo(BeNil(), "Cluster API's conditions stay on Machine %s", m.Name)
			}
		}, reconcileTimeout).Should(Succeed(), "no ControlPlaneEtcd is in charge: nothing keeps the condition current")
		got := &clusterv1.Machine{}
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.machines["cp-0"]), got)).To(Succeed())
		Expect(conditions.Get(got, otherWriterCondition)).NotTo(BeNil(), "another writer's condition must survive")
	}, SpecTimeout(4*time.Minute))

	It("remediates nothing while etcd-adapter's controllers are down: a member that dies then leaves its Machine's condition as it was, and the clock starts only once they are back", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		c.setMemberTimeouts(ctx)
		c.expectMemberConditions(ctx, metav1.ConditionTrue)
		createSampleMHC(ctx, c)
		startOwnerRemediation(ctx, c)
		sick := c.machines["cp-2"]

		By("the controllers stop (their webhooks still answer), then cp-2's member dies")
		Expect(adapter.Stop()).To(Succeed())
		webhooks, err := startWebhooksOnly(ctx, mgmt)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.workload.Etcd.StopMember(ctx, c.workload.Etcd.MemberOnNode("cp-2").Name())).To(Succeed())
		Consistently(func(g Gomega) {
			m := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(sick), m)).To(Succeed())
			g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue())
			g.Expect(conditions.IsFalse(m, v1alpha1.MemberHealthyMachineCondition)).To(BeFalse(), "nobody observes etcd: the condition must not turn False")
			g.Expect(conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedCondition)).To(BeFalse(), "the MachineHealthCheck must not mark Machine %s", sick.Name)
		}, 2*e2eMemberUnhealthyTimeout, time.Second).Should(Succeed())

		By("the controllers are back: the member is seen dead from now on, so the Machine is remediated only after the timeout counted from then")
		Expect(webhooks.Stop()).To(Succeed())
		back := time.Now()
		Expect(restoreAdapter()).To(Succeed())
		deleting := waitForDeletion(ctx, sick)
		Expect(deleting.Sub(back)).To(BeNumerically(">=", e2eMemberUnhealthyTimeout), "the outage must not count as evidence")
		c.expectGone(ctx, sick)
		c.expectMembers(ctx, 2)
	}, SpecTimeout(8*time.Minute))
})

// createSampleMHC creates the first MachineHealthCheck of
// config/samples/machinehealthcheck-etcd-member.yaml for the Cluster: remediate a control-plane
// Machine whose EtcdAdapterMemberHealthy condition is False (never on Unknown), one at a time. Its
// timeoutSeconds is cut to 1, so that a spec does not wait a minute on top of
// memberUnhealthyTimeout.
func createSampleMHC(ctx context.Context, c *testCluster, edits ...func(*clusterv1.MachineHealthCheck)) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "machinehealthcheck-etcd-member.yaml"))
	Expect(err).NotTo(HaveOccurred())
	doc := strings.Split(string(raw), "\n---\n")[0]
	mhc := &clusterv1.MachineHealthCheck{}
	Expect(yaml.UnmarshalStrict([]byte(doc), mhc)).To(Succeed())
	mhc.Namespace, mhc.Spec.ClusterName = c.cluster.Namespace, c.cluster.Name
	mhc.Name = strings.Replace(mhc.Name, "my-cluster", c.cluster.Name, 1)
	for i := range mhc.Spec.Checks.UnhealthyMachineConditions {
		mhc.Spec.Checks.UnhealthyMachineConditions[i].TimeoutSeconds = ptr.To[int32](1)
	}
	for _, edit := range edits {
		edit(mhc)
	}
	Expect(mgmt.Client.Create(ctx, mhc)).To(Succeed())
}

// withoutUnhealthyLimit drops the sample's unhealthyLessThanOrEqualTo, so that the quorum guard
// alone must keep etcd's quorum.
func withoutUnhealthyLimit(mhc *clusterv1.MachineHealthCheck) {
	mhc.Spec.Remediation.TriggerIf = clusterv1.MachineHealthCheckRemediationTriggerIf{}
}

// withNodeNetworkUnavailable adds a Node check to the sample (NetworkUnavailable True for 1 s),
// so that a Machine can be remediated for a reason that leaves its Node Ready and its etcd member
// healthy.
func withNodeNetworkUnavailable(mhc *clusterv1.MachineHealthCheck) {
	mhc.Spec.Checks.UnhealthyNodeConditions = append(mhc.Spec.Checks.UnhealthyNodeConditions, clusterv1.UnhealthyNodeCondition{
		Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue, TimeoutSeconds: ptr.To[int32](1),
	})
}

// holdDrain puts a Pod on the Node under a PodDisruptionBudget that allows no eviction, so that
// Cluster API's drain of the Node's Machine never ends (see drain_pdb_test.go).
func holdDrain(ctx context.Context, c *testCluster, node string) {
	wl := c.workload.APIServer.Client
	pod := createPod(ctx, wl, node)
	Expect(wl.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	pod.Labels = map[string]string{"app": "held"}
	Expect(wl.Update(ctx, pod)).To(Succeed())
	Expect(wl.Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "held"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: pod.Labels},
		},
	})).To(Succeed())
}

// remediateDeadMember stops the member on the Node of Machine node and checks that the
// MachineHealthCheck marks that Machine on etcd-adapter's condition while its Node stays Ready,
// that the owner stand-in deletes it, and that it goes with its member; another writer's
// condition on the Machine survives etcd-adapter's patches. It reports the time from the
// member's death to the MachineHealthCheck's mark and to the Machine's deletion.
func remediateDeadMember(ctx context.Context, c *testCluster, node string, backend v1alpha1.Backend) {
	c.setMemberTimeouts(ctx)
	c.expectMemberConditions(ctx, metav1.ConditionTrue)
	sick := c.machines[node]
	setOtherWriterCondition(ctx, sick)
	createSampleMHC(ctx, c)
	startOwnerRemediation(ctx, c)

	By(fmt.Sprintf("the member on %s dies; its Node stays Ready", node))
	died := time.Now()
	Expect(c.workload.Etcd.StopMember(ctx, c.workload.Etcd.MemberOnNode(node).Name())).To(Succeed())
	// Note: status.machineMembers is read on every poll, while the member is unhealthy and before
	// the condition turns False: once the remediation removed the member, the Machine has no
	// entry there any more, and on a loaded machine the poll that sees the condition False may
	// come after that.
	var falseSince, seenUnhealthy time.Time
	Eventually(func(g Gomega) {
		cpe := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.cpe), cpe)).To(Succeed())
		for _, mm := range cpe.Status.MachineMembers {
			if mm.MachineName == sick.Name && mm.UnhealthySince != nil && seenUnhealthy.IsZero() {
				seenUnhealthy = mm.UnhealthySince.Time
			}
		}
		m := &clusterv1.Machine{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(sick), m)).To(Succeed())
		g.Expect(conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedCondition) || !m.DeletionTimestamp.IsZero()).To(BeTrue())
		cond := conditions.Get(m, v1alpha1.MemberHealthyMachineCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(v1alpha1.EtcdMemberNotHealthyReason))
		falseSince = cond.LastTransitionTime.Time
		g.Expect(conditions.Get(m, otherWriterCondition)).NotTo(BeNil(), "another writer's condition must survive etcd-adapter's patches")
		g.Expect(conditions.Get(m, clusterv1.MachineHealthCheckSucceededCondition)).NotTo(BeNil(), "the MachineHealthCheck's condition must survive")
	}, deletionTimeout, 200*time.Millisecond).Should(Succeed(), "the MachineHealthCheck must mark Machine %s on %s", sick.Name, v1alpha1.MemberHealthyMachineCondition)
	marked := time.Now()
	Expect(seenUnhealthy).NotTo(BeZero(), "status.machineMembers must hold since when the member of %s is unhealthy", sick.Name)
	Expect(falseSince.Sub(seenUnhealthy)).To(BeNumerically(">=", e2eMemberUnhealthyTimeout-time.Second),
		"the condition turns False only after memberUnhealthyTimeout (both times are whole seconds)")
	deleting := waitForDeletion(ctx, sick)
	n := &corev1.Node{}
	Expect(c.workload.APIServer.Client.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
	Expect(nodeReady(n)).To(BeTrue(), "the Node must stay Ready: only etcd-adapter's condition says the Machine is broken")
	AddReportEntry(fmt.Sprintf("%s: member death to replacement start", backend), fmt.Sprintf(
		"seen unhealthy after %s, condition False after %s (whole seconds), MachineHealthCheck mark after %s, Machine deletion after %s (memberUnhealthyTimeout %s, observationInterval %s, MHC timeoutSeconds 1)",
		seenUnhealthy.Sub(died).Round(time.Second), falseSince.Sub(died).Round(time.Second),
		marked.Sub(died).Round(100*time.Millisecond), deleting.Sub(died).Round(100*time.Millisecond), e2eMemberUnhealthyTimeout, observationInterval))
	c.expectGone(ctx, sick)
	c.expectMembers(ctx, 2)
}

// refuseOnLastObservation plays a stacked control plane losing quorum with the sample
// MachineHealthCheck and the owner stand-in in place: cp-2's member dies (stop stops a member) and
// etcd-adapter records since when it is unhealthy; then cp-1's dies and the workload apiserver
// stops serving with it. The quorum guard, unable to observe etcd, must refuse deleting cp-1 and
// cp-0 on the last observation, and no member is removed.
func refuseOnLastObservation(ctx context.Context, c *testCluster, flavour string, stop func(member string) error) {
	// memberUnhealthyTimeout stays at its default (2m): no Machine is marked before etcd becomes
	// unobservable, and from then on the condition is Unknown, which the sample does not
	// remediate; the guard is asked directly, as the owner would ask it.
	c.expectMemberConditions(ctx, metav1.ConditionTrue)
	createSampleMHC(ctx, c, withoutUnhealthyLimit)
	startOwnerRemediation(ctx, c)
	before := memberIDs(ctx, c)

	By("cp-2's member dies; its Node stays Ready and etcd-adapter records since when it is unhealthy")
	dead := c.workload.Etcd.MemberOnNode("cp-2").Name()
	Expect(stop(dead)).To(Succeed())
	Eventually(func(g Gomega) {
		var since *metav1.Time
		for _, mm := range c.status(ctx).Status.MachineMembers {
			if mm.MachineName == c.machines["cp-2"].Name {
				since = mm.UnhealthySince
			}
		}
		g.Expect(since).NotTo(BeNil())
	}, reconcileTimeout).Should(Succeed(), "status.machineMembers must hold since when the member of cp-2 is unhealthy")

	By("cp-1's member dies: quorum is lost, and the workload apiserver stops serving with it")
	Expect(stop(c.workload.Etcd.MemberOnNode("cp-1").Name())).To(Succeed())
	Expect(c.workload.APIServer.StopServing()).To(Succeed())
	DeferCleanup(c.workload.APIServer.StartServing)
	for _, node := range []string{"cp-1", "cp-0"} {
		m := c.machines[node]
		Eventually(func() string { return guardVerdict(ctx, m) }, reconcileTimeout).Should(And(
			ContainSubstring("("+v1alpha1.MemberRemovalHealthUnknownReason+")"),
			ContainSubstring("etcd could not be observed"),
			ContainSubstring(dead+" (unhealthy since"),
		), "the quorum guard must refuse deleting Machine %s", m.Name)
		AddReportEntry(flavour+", stacked: deleting "+node+" with etcd unobservable, refused", guardVerdict(ctx, m))
	}
	Consistently(func(g Gomega) {
		for _, m := range c.machines {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue(), "Machine %s must not be deleted while quorum is lost", got.Name)
		}
	}, 20*time.Second, time.Second).Should(Succeed())
	Expect(serializableMemberIDs(ctx, c, "cp-0")).To(Equal(before), "no member was removed")
}

// serializableMemberIDs lists the etcd member IDs, sorted, as the running member on the Node
// knows them: with quorum lost a linearizable member list never returns.
func serializableMemberIDs(ctx context.Context, c *testCluster, node string) []uint64 {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cli, err := c.workload.Etcd.MemberOnNode(node).NewClient(ctx)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cli.Close() }()
	resp, err := cli.MemberList(ctx, clientv3.WithSerializable())
	Expect(err).NotTo(HaveOccurred())
	var ids []uint64
	for _, m := range resp.Members {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return ids
}

// waitForDeletion waits until the Machine is being deleted (or gone) and returns when that was
// first seen.
func waitForDeletion(ctx context.Context, m *clusterv1.Machine) time.Time {
	Eventually(func(g Gomega) {
		got := &clusterv1.Machine{}
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
			return
		}
		g.Expect(got.DeletionTimestamp.IsZero()).To(BeFalse())
	}, deletionTimeout, 200*time.Millisecond).Should(Succeed(), "the owner must delete Machine %s", m.Name)
	return time.Now()
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setMemberTimeouts sets the ControlPlaneEtcd's spec.memberUnhealthyTimeout and
// spec.memberRecoveryTime to this suite's and returns once a pass has written the status for
// them.
func (c *testCluster) setMemberTimeouts(ctx context.Context) {
	cpe := c.status(ctx)
	before := cpe.DeepCopy()
	cpe.Spec.MemberUnhealthyTimeout = &metav1.Duration{Duration: e2eMemberUnhealthyTimeout}
	cpe.Spec.MemberRecoveryTime = &metav1.Duration{Duration: e2eMemberRecoveryTime}
	Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(before))).To(Succeed())
	Eventually(func(g Gomega) {
		got := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(BeNumerically(">=", cpe.Generation))
	}, reconcileTimeout).Should(Succeed(), "a pass for the member timeouts")
}

// expectMemberConditions waits until every tracked Machine has etcd-adapter's condition with
// the status, and status.machineMembers an entry for it.
func (c *testCluster) expectMemberConditions(ctx context.Context, status metav1.ConditionStatus) {
	Eventually(func(g Gomega) {
		names := map[string]bool{}
		for _, mm := range c.status(ctx).Status.MachineMembers {
			names[mm.MachineName] = true
		}
		for _, m := range c.machines {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			cond := conditions.Get(got, v1alpha1.MemberHealthyMachineCondition)
			g.Expect(cond).NotTo(BeNil(), "Machine %s", m.Name)
			g.Expect(cond.Status).To(Equal(status), "Machine %s: %+v", m.Name, cond)
			g.Expect(names).To(HaveKey(m.Name))
		}
	}, reconcileTimeout).Should(Succeed())
}

// setOtherWriterCondition writes a condition on the Machine as another controller would, with
// Cluster API's patch helper owning that one condition.
func setOtherWriterCondition(ctx context.Context, m *clusterv1.Machine) {
	got := &clusterv1.Machine{}
	Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
	helper, err := patch.NewHelper(got, mgmt.Client)
	Expect(err).NotTo(HaveOccurred())
	conditions.Set(got, metav1.Condition{Type: otherWriterCondition, Status: metav1.ConditionTrue, Reason: "Test"})
	Expect(helper.Patch(ctx, got, patch.WithOwnedConditions{Conditions: []string{otherWriterCondition}})).To(Succeed())
}

// ownerRemediation plays the control-plane provider's part of a MachineHealthCheck remediation as
// KubeadmControlPlane does (sigs.k8s.io/cluster-api v1.14.2
// controlplane/kubeadm/reconcilers/kubeadmcontrolplane/remediation.go reconcileUnhealthyMachines)
// and KThreesControlPlane after it (k3s-io/cluster-api-k3s v0.3.0, commit e0a92c9,
// controlplane/controllers/remediation.go reconcileUnhealthyMachines, a port of KCP's): while any
// control-plane Machine is being deleted it waits; otherwise it deletes the oldest Machine the
// MachineHealthCheck marked (MachineHealthCheckSucceeded False and OwnerRemediated False). A
// refused deletion is kept, as the providers put it into OwnerRemediated's message. Left out: the
// providers' own etcd preflight (canSafelyRemoveEtcdMember), so that the quorum guard alone must
// keep quorum, as it must for a provider whose check is missing or wrong; their retry limits, which
// play no part in one remediation; and the bare pre-terminate hook cluster-api-k3s adds right
// before the deletion, which etcd-adapter adopts when no KThreesControlPlane is left (tested in
// k3s_coexistence_test.go).
type ownerRemediation struct {
	// eager deletes a marked Machine while another is being deleted, as a provider whose
	// check of deletions under way is missing: then only the quorum guard keeps quorum.
	eager bool

	mu       sync.Mutex
	refusals map[string]string
}

// ownerInterval is how often the owner stand-in looks at the Machines.
const ownerInterval = 500 * time.Millisecond

func startOwnerRemediation(ctx context.Context, c *testCluster) *ownerRemediation {
	return startOwner(ctx, c, &ownerRemediation{refusals: map[string]string{}})
}

// startEagerOwnerRemediation is startOwnerRemediation for an owner that does not wait for
// deletions under way.
func startEagerOwnerRemediation(ctx context.Context, c *testCluster) *ownerRemediation {
	return startOwner(ctx, c, &ownerRemediation{eager: true, refusals: map[string]string{}})
}

func startOwner(ctx context.Context, c *testCluster, o *ownerRemediation) *ownerRemediation {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	DeferCleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		t := time.NewTicker(ownerInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				o.step(ctx, c)
			}
		}
	}()
	return o
}

func (o *ownerRemediation) step(ctx context.Context, c *testCluster) {
	list := &clusterv1.MachineList{}
	if err := mgmt.Client.List(ctx, list, client.InNamespace(c.cluster.Namespace), client.MatchingLabels{clusterv1.MachineControlPlaneLabel: ""}); err != nil {
		return
	}
	var marked []*clusterv1.Machine
	for i := range list.Items {
		m := &list.Items[i]
		if !m.DeletionTimestamp.IsZero() {
			if o.eager {
				continue
			}
			return
		}
		if conditions.IsFalse(m, clusterv1.MachineHealthCheckSucceededCondition) && conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedCondition) {
			marked = append(marked, m)
		}
	}
	if len(marked) == 0 {
		return
	}
	sort.Slice(marked, func(i, j int) bool { return marked[i].CreationTimestamp.Before(&marked[j].CreationTimestamp) })
	if err := mgmt.Client.Delete(ctx, marked[0]); err != nil {
		o.mu.Lock()
		o.refusals[marked[0].Name] = err.Error()
		o.mu.Unlock()
	}
}

// refused returns every refused deletion so far, by Machine.
func (o *ownerRemediation) refused() map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.refusals)
}

// refusal returns why the deletion of the Machine was last refused, if it was.
func (o *ownerRemediation) refusal(machine string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok := o.refusals[machine]
	return r, ok
}
