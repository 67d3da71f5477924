package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// noSpaceQuota is the members' --quota-backend-bytes in the NOSPACE spec: small, so that writes
// fill it in seconds.
const noSpaceQuota = 32 << 20

// noSpaceHeadroom is the spec's spec.maintenance.defragmentation.noSpaceHeadroomPercent. etcd
// raises NOSPACE when its database file, data and free pages together, reaches the quota
// (go.etcd.io/etcd/server/v3 storage/quota.go, BackendQuota.Available, over the backend's size),
// and how many pages are free then depends on how etcd batched the puts into commits: on a busy
// machine the data in use was 25.2 to 25.5 MiB of the 32 MiB quota, below the default target (20%
// headroom, 25.6 MiB), so a defragmentation rightly brought every member below it and disarmed.
// With 50% the data the spec writes stays above the target, as the spec's first half needs.
const noSpaceHeadroom = 50

var _ = Describe("Remediation held by a NOSPACE alarm", func() {
	It("kubeadm: while a NOSPACE alarm is raised the quorum guard refuses the owner's remediation of the Machine a MachineHealthCheck marked; once the data shrinks, spec.maintenance defragments every member and disarms, and the remediation goes through with quorum kept", func(ctx SpecContext) {
		c := startKubeadmClusterWith(ctx, workload.KubeadmOptions{Members: 3, QuotaBackendBytes: noSpaceQuota}, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		c.setMaintenance(ctx, &v1alpha1.MaintenanceSpec{Defragmentation: &v1alpha1.DefragmentationSpec{
			OnNoSpace: ptr.To(true), NoSpaceHeadroomPercent: ptr.To[int32](noSpaceHeadroom)}})
		owner := startOwnerRemediation(ctx, c)
		before := memberIDs(ctx, c)

		By("writes through cp-0's member fill the database until etcd refuses them and raises NOSPACE")
		writer := memberClient(ctx, c, "cp-0")
		for i := range expiring {
			_, err := writer.Put(ctx, fmt.Sprintf("/registry/events/default/e-%03d", i), "event")
			Expect(err).NotTo(HaveOccurred())
		}
		written := fillUntilNoSpace(ctx, writer)
		target := noSpaceQuota / 100 * (100 - noSpaceHeadroom)
		Expect(written).To(BeNumerically(">", target), "the data written (%d bytes) must be above the NOSPACE target (%d bytes), or a defragmentation brings every member below it and rightly disarms", written, target)
		var alarmed []uint64
		Eventually(func(g Gomega) {
			alarmed = noSpaceAlarms(ctx, g, writer)
			g.Expect(alarmed).NotTo(BeEmpty())
		}, reconcileTimeout).Should(Succeed(), "etcd must list its NOSPACE alarm")
		Eventually(func(g Gomega) {
			cond := findCondition(c.status(ctx), v1alpha1.EtcdClusterHealthyCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(cond.Message).To(ContainSubstring("NOSPACE"))
		}, reconcileTimeout).Should(Succeed(), "etcd-adapter must report the alarm")

		By("maintenance defragments the members once, and then says the data itself must shrink: a defragmentation cannot bring them below quota")
		Eventually(func(g Gomega) {
			m := c.status(ctx).Status.Maintenance
			g.Expect(m).NotTo(BeNil())
			g.Expect(m.Message).To(ContainSubstring("the data must shrink"))
		}, deletionTimeout).Should(Succeed())
		Expect(noSpaceAlarms(ctx, Default, writer)).NotTo(BeEmpty(), "NOSPACE must stay raised while the data is above quota")

		// Note: the alarms are read again: a member that applied a put over its quota before the
		// first alarm reached it proposes its own, which etcd may list only after the first.
		alarmed = noSpaceAlarms(ctx, Default, writer)
		// Note: however many members are alarmed, quorum holds: a member with a NOSPACE alarm
		// still votes (etcd refuses puts under it, go.etcd.io/etcd/server/v3 etcdserver/apply,
		// applierV3Capped; raft commits as before), so every member answers and a membership change
		// would commit. The removal would leave fewer healthy members than a majority: the guard
		// refuses it as one that would lose quorum, never as quorum already lost.
		victimNode := heldNode(c, alarmed)
		victim := c.machines[victimNode]
		victimID := c.workload.Etcd.MemberOnNode(victimNode).ID()
		// Note: the victim may be cp-0, whose member the writes went through: once NOSPACE is
		// disarmed the owner's remediation removes it at once, and a removed member answers
		// nothing but "raft: stopped". From the disarm on, the spec reads etcd through a member
		// that stays.
		survivor := memberClient(ctx, c, survivingNode(c, victimNode))
		By(fmt.Sprintf("%s's Node reports NetworkUnavailable while its member stays healthy; a MachineHealthCheck marks Machine %s and the owner tries to remediate it", victimNode, victim.Name))
		setNodeCondition(ctx, c, victimNode, corev1.NodeNetworkUnavailable, corev1.ConditionTrue)
		createMHC(ctx, c, clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{{
			Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue, TimeoutSeconds: ptr.To[int32](1)}}}, victim)
		Eventually(func() string { r, _ := owner.refusal(victim.Name); return r }, reconcileTimeout, 200*time.Millisecond).Should(
			ContainSubstring("("+v1alpha1.MemberRemovalWouldLoseQuorumReason+")"), "the quorum guard must refuse the owner's deletion of %s with %d of %d members alarmed", victim.Name, len(alarmed), len(before))
		refusal, _ := owner.refusal(victim.Name)
		Expect(refusal).To(ContainSubstring("NOSPACE"), "the refusal must name the alarm")
		AddReportEntry("kubeadm: the owner's remediation under NOSPACE, refused", refusal)
		Consistently(func(g Gomega) {
			m := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(victim), m)).To(Succeed())
			g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "Machine %s must not be deleted while the alarm holds its remediation", m.Name)
			g.Expect(memberIDsWith(ctx, g, c)).To(Equal(before), "no member is removed")
		}, 10*time.Second, time.Second).Should(Succeed())

		By("the data shrinks: objects are deleted and a person compacts, as etcd's NOSPACE recovery says; maintenance defragments every member and disarms")
		// Note: etcd applies deletes and compactions under NOSPACE (go.etcd.io/etcd/server/v3
		// etcdserver/apply/apply.go, applierV3Capped refuses only puts, lease grants and txns
		// with puts). The kube-apiserver's own compaction cannot run then: it is a txn that puts
		// compact_rev_key before it compacts (k8s.io/apiserver pkg/storage/etcd3/compact.go,
		// Compact), so a person compacts (etcd's maintenance guide: compact, defragment,
		// disarm). etcd-adapter never compacts; it defragments and disarms.
		_, err := writer.Delete(ctx, "/registry/fill/", clientv3.WithPrefix())
		Expect(err).NotTo(HaveOccurred())
		rev, err := writer.Get(ctx, "/registry/fill/")
		Expect(err).NotTo(HaveOccurred())
		_, err = writer.Compact(ctx, rev.Header.Revision, clientv3.WithCompactPhysical())
		Expect(err).NotTo(HaveOccurred())
		// Note: the kube-apiserver goes on deleting meanwhile (expired Events, the garbage
		// collector's deletions), and etcd takes deletes under NOSPACE. etcd recomputes a member's
		// dbSizeInUse when its backend begins a write transaction, and the pages a transaction
		// freed count as in use until no read transaction older than it is open (bbolt
		// freePages): a member takes a few commits after the compaction to report its data
		// below quota. Without them etcd-adapter, which defragmented the members under NOSPACE
		// moments ago, waits etcd.StaleInUseRetryAfter before it defragments them again.
		expireEvents(ctx, survivor)
		shrunk, said := time.Now(), ""
		Eventually(func(g Gomega) {
			if m := c.status(ctx).Status.Maintenance; m != nil && m.Message != said {
				said = m.Message
				GinkgoWriter.Printf("%s after the data shrank: status.maintenance.message: %s\n", time.Since(shrunk).Round(time.Millisecond), said)
			}
			g.Expect(noSpaceAlarms(ctx, g, survivor)).To(BeEmpty())
		}, deletionTimeout, time.Second).Should(Succeed(), "etcd-adapter must disarm NOSPACE")
		AddReportEntry("kubeadm: NOSPACE disarmed after the data shrank", time.Since(shrunk).Round(time.Second).String())
		// Note: etcd-adapter disarms, then its pass writes the status.
		var m *v1alpha1.MaintenanceStatus
		Eventually(func(g Gomega) {
			m = c.status(ctx).Status.Maintenance
			g.Expect(m).NotTo(BeNil())
			g.Expect(m.LastNoSpaceDisarmTime).NotTo(BeNil())
		}, reconcileTimeout).Should(Succeed(), "status.maintenance must record the disarm")
		defragmented := map[string]bool{}
		for _, r := range m.Defragmentations {
			AddReportEntry("kubeadm: defragmented "+r.Member, fmt.Sprintf("%s in %s: %d -> %v bytes", r.Reason, r.Duration.Round(time.Millisecond), r.DBSizeBefore, ptr.Deref(r.DBSizeAfter, -1)))
			Expect(r.Error).To(BeEmpty())
			if r.Reason == v1alpha1.DefragmentationReasonNoSpace {
				defragmented[r.Member] = true
			}
		}
		for _, mm := range c.workload.Etcd.Members() {
			Expect(defragmented).To(HaveKey(mm.Name()), "member %s must have been defragmented for NOSPACE", mm.Name())
		}
		Eventually(func() []string { return eventReasons(ctx, c.cpe.Namespace, c.cpe.Name) }, reconcileTimeout).Should(ContainElement(v1alpha1.EventNoSpaceDisarmed))

		By("the owner's remediation goes through: the Machine goes with its member, and etcd keeps quorum and takes writes")
		waitForDeletion(ctx, victim)
		c.expectGone(ctx, victim)
		Eventually(func(g Gomega) []uint64 { return memberIDsWith(ctx, g, c) }, reconcileTimeout).Should(And(HaveLen(2), Not(ContainElement(victimID))))
		c.expectMembers(ctx, 2)
		Expect(memberIDs(ctx, c)).To(Equal(slices.DeleteFunc(slices.Clone(before), func(id uint64) bool { return id == victimID })), "only the remediated Machine's member is removed")
		Eventually(func() error {
			_, err := survivor.Put(ctx, "/registry/after-nospace", "written")
			return err
		}, reconcileTimeout).Should(Succeed())
	}, SpecTimeout(10*time.Minute))
})

// expiring is how many Events the NOSPACE spec writes before it fills the database, for
// expireEvents to delete one by one.
const expiring = 240

// expireEvents deletes the Events the spec wrote, one every quarter second, as the kube-apiserver
// deletes expired objects, until they are gone or the spec ends.
func expireEvents(ctx context.Context, cli *clientv3.Client) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	DeferCleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for i := range expiring {
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
			_, _ = cli.Delete(ctx, fmt.Sprintf("/registry/events/default/e-%03d", i))
		}
	}()
}

// setMaintenance sets the ControlPlaneEtcd's spec.maintenance and returns once a pass has
// written the status for it.
func (c *testCluster) setMaintenance(ctx context.Context, spec *v1alpha1.MaintenanceSpec) {
	c.changeSpec(ctx, func(s *v1alpha1.ControlPlaneEtcdSpec) { s.Maintenance = spec }, "spec.maintenance")
}

// survivingNode is the Node of a member other than the one on gone.
func survivingNode(c *testCluster, gone string) string {
	for _, m := range c.workload.Etcd.Members() {
		if m.NodeName() != gone {
			return m.NodeName()
		}
	}
	Fail("no member on a Node other than " + gone)
	return ""
}

// memberClient is an etcd client of the member on the Node only, as the kube-apiserver of a
// kubeadm control plane writes through its own member (--etcd-servers=https://127.0.0.1:2379).
func memberClient(ctx context.Context, c *testCluster, node string) *clientv3.Client {
	cli, err := c.workload.Etcd.MemberOnNode(node).NewClient(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cli.Close)
	return cli
}

// fillUntilNoSpace writes 256 KiB values until etcd refuses with its own "etcdserver: mvcc:
// database space exceeded" (rpctypes.ErrNoSpace): the member the writes reach raised NOSPACE
// (go.etcd.io/etcd/server/v3 etcdserver/api/v3rpc/quota.go, quotaAlarmer.check). It returns the
// bytes of the values etcd took.
func fillUntilNoSpace(ctx context.Context, cli *clientv3.Client) int {
	value := strings.Repeat("v", 256<<10)
	for i := 0; ; i++ {
		Expect(i).To(BeNumerically("<", 4*noSpaceQuota/len(value)), "etcd never refused a write")
		_, err := cli.Put(ctx, fmt.Sprintf("/registry/fill/%d", i), value)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			GinkgoWriter.Printf("etcd refused write %d: %v\n", i, err)
			return i * len(value)
		}
		Expect(err).NotTo(HaveOccurred())
	}
}

// noSpaceAlarms lists the IDs of the members etcd lists a NOSPACE alarm for.
func noSpaceAlarms(ctx context.Context, g Gomega, cli *clientv3.Client) []uint64 {
	resp, err := cli.AlarmList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var out []uint64
	for _, a := range resp.Alarms {
		if a.Alarm.String() == "NOSPACE" {
			out = append(out, a.MemberID)
		}
	}
	return out
}

// heldNode is a Node of the cluster whose Machine's remediation an alarm on another member
// holds: a Node whose member no alarm names if there is one, else any Node while another member
// is alarmed too. Every member may be alarmed by the time etcd lists the first alarm: the members
// hold the same data, and each one that applies a put over its quota before an alarm reached it
// raises NOSPACE for itself (go.etcd.io/etcd/server/v3 etcdserver/server.go, applyEntryNormal);
// which of them do is a race of the apply loops.
func heldNode(c *testCluster, alarmed []uint64) string {
	for _, node := range c.workload.Nodes {
		if !slices.Contains(alarmed, c.workload.Etcd.MemberOnNode(node).ID()) {
			return node
		}
	}
	for _, node := range c.workload.Nodes {
		own := c.workload.Etcd.MemberOnNode(node).ID()
		if slices.ContainsFunc(alarmed, func(id uint64) bool { return id != own }) {
			return node
		}
	}
	Fail(fmt.Sprintf("no member other than an alarmed one (%x): no Machine's remediation is held by another member's alarm", alarmed))
	return ""
}
