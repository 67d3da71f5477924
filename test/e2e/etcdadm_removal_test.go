package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/controlplaneetcd"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// managedEtcdadm is a real 3-member TLS etcd of an EtcdadmCluster whose ControlPlaneEtcd is in
// mode Manage, with one hooked etcd Machine per member (machines[i] hosts etcd.Members()[i]).
type managedEtcdadm struct {
	etcd     *etcdcluster.Cluster
	cpe      *v1alpha1.ControlPlaneEtcd
	machines []*clusterv1.Machine
}

// startManagedEtcdadm sets up a managedEtcdadm as the etcdadm controller would (see the spec
// "External etcd of an EtcdadmCluster in mode Manage"); hooks are extra pre-terminate hook
// annotations each Machine gets at creation, as another provider's would be.
func startManagedEtcdadm(ctx context.Context, name string, ips []string, hooks map[int]string) managedEtcdadm {
	return startManagedEtcdadmPending(ctx, name, ips, hooks, -1)
}

// startManagedEtcdadmPending is startManagedEtcdadm with etcd Machine pending created before the
// infrastructure provider reported its address (none when pending is -1): its member is then tied
// to no Machine.
func startManagedEtcdadmPending(ctx context.Context, name string, ips []string, hooks map[int]string, pending int) managedEtcdadm {
	x := startExternalEtcd(ctx, name, membersAt(name, ips))
	ec := createEtcdadmCluster(ctx, x.cluster)
	Expect(unstructured.SetNestedField(ec.Object, strings.Join(x.ClientURLs(), ","), "status", "endpoints")).To(Succeed())
	Expect(mgmt.Client.Status().Update(ctx, ec)).To(Succeed())
	useKubeadmControlPlane(ctx, x.cluster, nil)
	cpe := &v1alpha1.ControlPlaneEtcd{}
	Eventually(func() error { return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(x.cluster), cpe) }, reconcileTimeout).Should(Succeed())
	before := cpe.DeepCopy()
	cpe.Spec.Mode = v1alpha1.ModeManage
	cpe.Spec.ObservationInterval = &metav1.Duration{Duration: observationInterval}
	Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(before))).To(Succeed())
	var machines []*clusterv1.Machine
	for i, ip := range ips {
		m := createEtcdMachineWithoutAddress(ctx, x.cluster, ec, fmt.Sprintf("%s-%d", ec.GetName(), i), true)
		if i != pending {
			setEtcdMachineAddress(ctx, m, ip)
		}
		if hook, ok := hooks[i]; ok {
			patchAnnotation(ctx, m, hook, "")
		}
		machines = append(machines, m)
	}
	Eventually(func(g Gomega) {
		got := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
		g.Expect(got.Status.Members).To(HaveLen(len(ips)))
		var bound int
		for _, m := range got.Status.Members {
			g.Expect(m.Health).To(Equal(v1alpha1.MemberHealthy), "member %s: %s", m.Name, m.Message)
			if m.MachineName != "" {
				bound++
			}
		}
		g.Expect(bound).To(Equal(len(ips)-min(1, pending+1)), "every member but the pending Machine's is bound: %+v", got.Status.Members)
	}, reconcileTimeout).Should(Succeed())
	return managedEtcdadm{etcd: x.Etcd, cpe: cpe, machines: machines}
}

// status reads the ControlPlaneEtcd.
func (e managedEtcdadm) status(ctx context.Context) *v1alpha1.ControlPlaneEtcd {
	got := &v1alpha1.ControlPlaneEtcd{}
	Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(e.cpe), got)).To(Succeed())
	return got
}

// setRemovalTimeout sets spec.memberRemovalTimeout.
func (e managedEtcdadm) setRemovalTimeout(ctx context.Context, d time.Duration) {
	cpe := e.status(ctx)
	before := cpe.DeepCopy()
	cpe.Spec.MemberRemovalTimeout = &metav1.Duration{Duration: d}
	Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(before))).To(Succeed())
}

// memberIDs lists the member IDs a linearizable member list of the running member via answers.
func (e managedEtcdadm) memberIDs(ctx context.Context, g Gomega, via int) []uint64 {
	members, err := e.etcd.Members()[via].MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var ids []uint64
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return ids
}

// expectRemoved waits until Machine i is gone, its member removed first: a Machine gone while its
// member is still in etcd stops the wait at once.
func (e managedEtcdadm) expectRemoved(ctx context.Context, i, via int) {
	m, id := e.machines[i], e.etcd.Members()[i].ID()
	Eventually(func(g Gomega) {
		ids := e.memberIDs(ctx, g, via)
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{}); apierrors.IsNotFound(err) {
			if slices.Contains(ids, id) {
				StopTrying(fmt.Sprintf("Machine %s was deleted while its etcd member %x is still a member", m.Name, id)).Now()
			}
			return
		}
		g.Expect(false).To(BeTrue(), "Machine %s is still there; members %x; status.removal %+v", m.Name, ids, e.status(ctx).Status.Removal)
	}, deletionTimeout).Should(Succeed())
}

// crashAtRemovalRecorded stops etcd-adapter right after it wrote the removal record of the
// Machine delete deletes and before it asks etcd (StepRemovalRecorded), runs then, and starts a
// fresh etcd-adapter.
func crashAtRemovalRecorded(ctx context.Context, deleteIt, then func()) {
	Expect(adapter.Stop()).To(Succeed())
	reached := make(chan struct{})
	var once sync.Once
	crashing, err := startAdapter(context.Background(), mgmt, func(rctx context.Context, s string) {
		if s != controlplaneetcd.StepRemovalRecorded {
			return
		}
		once.Do(func() { close(reached) })
		<-rctx.Done()
	})
	Expect(err).NotTo(HaveOccurred())
	deleteIt()
	Eventually(reached, deletionTimeout).Should(BeClosed())
	Expect(crashing.Stop()).To(Succeed())
	then()
	adapter, err = startAdapter(context.Background(), mgmt, nil)
	Expect(err).NotTo(HaveOccurred())
}

var _ = Describe("The removal flow of an EtcdadmCluster's etcd Machines", func() {
	It("retries a stopped removal of an etcd Machine when a person asks, and another deleting etcd Machine is not frozen meanwhile", func(ctx SpecContext) {
		e := startManagedEtcdadm(ctx, "eadm-retry", []string{"127.0.0.61", "127.0.0.62", "127.0.0.63"}, nil)
		a, c := e.machines[0], e.machines[2]
		const limit = 2 * time.Second
		e.setRemovalTimeout(ctx, limit)

		By("etcd-adapter stops after writing the removal record of etcd Machine A, before asking etcd, and stays down longer than spec.memberRemovalTimeout")
		crashAtRemovalRecorded(ctx, func() { Expect(deleteMachine(ctx, a)).To(BeEmpty()) }, func() {
			Eventually(func(g Gomega) {
				rec := e.status(ctx).Status.Removal
				g.Expect(rec).NotTo(BeNil())
				g.Expect(time.Since(rec.StartTime.Time)).To(BeNumerically(">", limit))
			}, reconcileTimeout).Should(Succeed())
		})
		By("the new etcd-adapter stops the removal as TimedOut and keeps the hook")
		Eventually(func(g Gomega) {
			rec := e.status(ctx).Status.Removal
			g.Expect(rec).NotTo(BeNil())
			g.Expect(rec.MachineName).To(Equal(a.Name))
			g.Expect(rec.Result).To(Equal(v1alpha1.RemovalTimedOut))
		}, deletionTimeout).Should(Succeed())
		Expect(e.memberIDs(ctx, Default, 1)).To(ContainElement(e.etcd.Members()[0].ID()), "nothing was removed")

		By("a person raises the limit, asks for a retry on etcd Machine A and deletes etcd Machine C: both members are removed, each before its Machine goes")
		e.setRemovalTimeout(ctx, 10*time.Minute)
		patchAnnotation(ctx, a, v1alpha1.RetryRemovalAnnotation, v1alpha1.AnnotationTrue)
		Expect(deleteMachine(ctx, c)).To(BeEmpty())
		e.expectRemoved(ctx, 0, 1)
		e.expectRemoved(ctx, 2, 1)
		Expect(e.memberIDs(ctx, Default, 1)).To(Equal([]uint64{e.etcd.Members()[1].ID()}))
		Eventually(func() []string {
			var reasons []string
			for _, ev := range eventsAbout(ctx, a) {
				reasons = append(reasons, ev.Reason)
			}
			return reasons
		}, reconcileTimeout).Should(ContainElements(v1alpha1.EventMemberRemovalTimedOut, v1alpha1.EventMemberRemovalRetried, v1alpha1.EventHookReleased))
	}, SpecTimeout(5*time.Minute))

	It("removes the member of a later deleting etcd Machine while the one held longest waits for another provider's hook", func(ctx SpecContext) {
		const other = clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/other-provider"
		e := startManagedEtcdadm(ctx, "eadm-wait", []string{"127.0.0.64", "127.0.0.65", "127.0.0.66"}, map[int]string{0: other})
		a, c := e.machines[0], e.machines[2]

		By("etcd Machine A is deleted and waits for the other provider's hook; then etcd Machine C is deleted")
		Expect(deleteMachine(ctx, a)).To(BeEmpty())
		Eventually(func(g Gomega) {
			cond := findCondition(e.status(ctx), v1alpha1.ProgressingCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Message).To(ContainSubstring("waits for pre-terminate hooks " + other))
		}, reconcileTimeout).Should(Succeed())
		Expect(deleteMachine(ctx, c)).To(BeEmpty())

		By("C's member is removed and C goes while A still waits")
		e.expectRemoved(ctx, 2, 1)
		got := &clusterv1.Machine{}
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(a), got)).To(Succeed())
		Expect(got.Annotations).To(HaveKey(v1alpha1.PreTerminateHookAnnotation))
		Expect(e.memberIDs(ctx, Default, 1)).To(ContainElement(e.etcd.Members()[0].ID()))

		By("the other provider releases its hook: A's member is removed, then A goes")
		patchAnnotationOff(ctx, a, other)
		e.expectRemoved(ctx, 0, 1)
		Expect(e.memberIDs(ctx, Default, 1)).To(Equal([]uint64{e.etcd.Members()[1].ID()}))
	}, SpecTimeout(5*time.Minute))

	It("repairs: the Machine of a member that died while the removal of the Machine held longest was asked is handled without waiting for that removal to time out", func(ctx SpecContext) {
		e := startManagedEtcdadm(ctx, "eadm-repair", []string{"127.0.0.67", "127.0.0.68", "127.0.0.69"}, nil)
		a, c := e.machines[0], e.machines[2]
		idB := e.etcd.Members()[1].ID()

		// Note: the record of A's removal is written before etcd is asked (write-ahead), so from
		// the record etcd-adapter cannot tell whether the MemberRemove went out, was refused
		// ("etcdserver: unhealthy cluster" once C's member is down), or sits in the leader's log to
		// be applied later. Stopping etcd-adapter between the record and the call gives that state
		// with C's member down.
		By("A is deleted; etcd-adapter stops right after recording A's removal; C's etcd member dies")
		crashAtRemovalRecorded(ctx, func() { Expect(deleteMachine(ctx, a)).To(BeEmpty()) }, func() {
			Expect(e.etcd.StopMember(ctx, e.etcd.Members()[2].Name())).To(Succeed())
		})
		By("A's removal, recorded InProgress, is refused now: removing A would lose quorum")
		Eventually(func(g Gomega) {
			got := e.status(ctx)
			g.Expect(got.Status.Removal).To(HaveValue(And(HaveField("MachineName", a.Name), HaveField("Result", v1alpha1.RemovalInProgress))))
			cond := findCondition(got, v1alpha1.ProgressingCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(v1alpha1.ProgressingRemovalBlockedReason), cond.Message)
		}, reconcileTimeout).Should(Succeed())

		By("the operator deletes C's Machine to repair: its dead member is removed and C goes, long before A's removal would time out (10m)")
		Expect(deleteMachine(ctx, c)).To(BeEmpty(), "the guard admits the Machine of a dead member")
		e.expectRemoved(ctx, 2, 1)

		By("then A's removal goes: judged from etcd itself, B alone is left and commits writes")
		e.expectRemoved(ctx, 0, 1)
		Expect(e.memberIDs(ctx, Default, 1)).To(Equal([]uint64{idB}))
		cli, err := e.etcd.Members()[1].NewClient(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cli.Close)
		putCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err = cli.Put(putCtx, "repair-check", "ok")
		Expect(err).NotTo(HaveOccurred(), "the member left has quorum")
	}, SpecTimeout(6*time.Minute))
})

// patchAnnotationOff takes an annotation off the Machine.
func patchAnnotationOff(ctx context.Context, m *clusterv1.Machine, key string) {
	Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	before := m.DeepCopy()
	delete(m.Annotations, key)
	Expect(mgmt.Client.Patch(ctx, m, client.MergeFrom(before))).To(Succeed())
}
