package kcp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	kcpenv "github.com/etcd-adapter/etcd-adapter/test/env/kcp"
)

// TestKCPManageMode runs KubeadmControlPlane v1.14.2 with the Cluster's ControlPlaneEtcd
// switched to spec.mode Manage, so every KCP Machine carries both KCP's kcp-cleanup hook and
// etcd-adapter's hook. For Kubernetes >= 1.31 KCP releases kcp-cleanup only when it is the last
// pre-terminate hook (reconcilePreTerminateHook), so etcd-adapter must run before it, not wait
// for it. A MachineHealthCheck remediation, a person's `kubectl delete machine` and a KCP
// scale-down 3->1 each complete: the Machine goes, etcd's member list loses exactly the members
// of the deleted Machines, each once, etcd-adapter recorded each removal once (KCP's hook found
// the member gone), and no deleting Machine is left holding a hook.
func TestKCPManageMode(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	suiteStart := time.Now()
	e, o := startManagedControlPlane(ctx, t, g)
	fmt.Printf("[manage] 3 replicas Available and every Machine holds both hooks after %v\n", time.Since(suiteStart).Round(time.Millisecond))

	members := startMembershipLog(ctx, g, e)
	defer members.stop()

	mhc := createMachineHealthCheck(ctx, g, e)
	victim := o.machineNames(ctx, g)[0]
	manageStep(ctx, g, o, members, "remediation", 3, func() {
		g.Expect(e.NodeNotReady(ctx, victim)).To(Succeed())
	})
	waitMHCHealthy(ctx, g, e, mhc, 3)
	g.Expect(e.Management.Client.Delete(ctx, mhc)).To(Succeed())

	doomed := o.machineNames(ctx, g)[1]
	manageStep(ctx, g, o, members, "kubectl delete machine", 3, func() {
		g.Expect(e.PersonClient().Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: e.Cluster.Namespace, Name: doomed}})).To(Succeed())
	})

	manageStep(ctx, g, o, members, "scale 3->1", 1, func() {
		updateKCP(ctx, g, e, func(kcp *controlplanev1.KubeadmControlPlane) { kcp.Spec.Replicas = ptr.To[int32](1) })
	})
	fmt.Printf("TestKCPManageMode took %v\n", time.Since(suiteStart).Round(time.Millisecond))
}

// manageControlPlaneEtcd waits for the ControlPlaneEtcd etcd-adapter's creation controller
// makes (Observe, beside KCP), switches it to Manage as a person would, and waits until every
// KCP Machine carries etcd-adapter's hook next to kcp-cleanup.
// startManagedControlPlane starts KCP beside etcd-adapter, creates a 3-replica control plane,
// waits until it is Available and switches its ControlPlaneEtcd to Manage.
func startManagedControlPlane(ctx context.Context, t *testing.T, g Gomega) (*kcpenv.Env, *observer) {
	e, err := kcpenv.Start(ctx, kcpenv.Options{EtcdAdapter: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(e.Stop()).To(Succeed()) })
	_, err = e.CreateControlPlane(ctx, 3)
	g.Expect(err).NotTo(HaveOccurred())
	waitAvailable(ctx, g, e, 3)
	o := &observer{e: e}
	manageControlPlaneEtcd(ctx, g, o)
	return e, o
}

func manageControlPlaneEtcd(ctx context.Context, g Gomega, o *observer) {
	var cpe *v1alpha1.ControlPlaneEtcd
	g.Eventually(func(g Gomega) {
		var err error
		cpe, err = o.controlPlaneEtcd(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cpe).NotTo(BeNil())
	}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	g.Expect(cpe.Spec.Mode).To(Equal(v1alpha1.ModeObserve))
	patch := client.MergeFrom(cpe.DeepCopy())
	cpe.Spec.Mode = v1alpha1.ModeManage
	cpe.Spec.ObservationInterval = &metav1.Duration{Duration: observationInterval}
	g.Expect(o.e.Management.Client.Patch(ctx, cpe, patch)).To(Succeed())
	expectBothHooks(ctx, g, o)
}

// expectBothHooks waits until every KCP Machine carries etcd-adapter's hook and KCP's.
func expectBothHooks(ctx context.Context, g Gomega, o *observer) {
	g.Eventually(func(g Gomega) {
		for _, m := range o.machines(ctx, g) {
			g.Expect(m.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue), "Machine %s", m.Name)
			g.Expect(m.Annotations).To(HaveKey(v1alpha1.KCPHookAnnotation), "Machine %s", m.Name)
		}
	}).WithTimeout(waitTimeout).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// manageStep does act and waits until KCP is done: replicas Machines, Available, none deleting
// or scaling. Then it asserts that etcd lost exactly the members of the Machines that went, each
// once; that etcd-adapter recorded one MemberRemoved Event per member (it removed it; KCP's hook
// had nothing left to remove); and that the remaining Machines hold both hooks again.
func manageStep(ctx context.Context, g Gomega, o *observer, members *membershipLog, step string, replicas int32, act func()) {
	before := o.machineNames(ctx, g)
	start := time.Now()
	removedBefore := len(members.removals())
	act()
	g.Eventually(func(g Gomega) {
		kcp := waitAvailable(ctx, g, o.e, replicas)
		g.Expect(kcp.Status.ObservedGeneration).To(Equal(kcp.Generation))
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneScalingDownCondition)).To(BeTrue())
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneScalingUpCondition)).To(BeTrue())
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneRemediatingCondition)).To(BeTrue())
		ms := o.machines(ctx, g)
		g.Expect(ms).To(HaveLen(int(replicas)))
		for _, m := range ms {
			g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "Machine %s is still deleting; hooks %v", m.Name, preTerminateHooks(m))
		}
		g.Expect(without(before, o.machineNames(ctx, g))).NotTo(BeEmpty())
	}).WithTimeout(waitTimeout).WithPolling(250*time.Millisecond).Should(Succeed(), func() string { return dump(ctx, o.e) + adapterProgress(ctx, o) })
	after := o.machineNames(ctx, g)
	gone := without(before, after)
	fmt.Printf("[%s] took %v (Machines %v -> %v)\n", step, time.Since(start).Round(time.Millisecond), before, after)

	g.Eventually(func(g Gomega) {
		current, err := o.e.EtcdMembers(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(current).To(Equal(after))
	}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	var removed []string
	g.Eventually(func() []string {
		removed = members.removals()[removedBefore:]
		return removed
	}).WithTimeout(time.Minute).WithPolling(membershipPoll).Should(ConsistOf(gone), "[%s] etcd must lose exactly the members of the Machines that went, each once", step)
	for _, name := range gone {
		// Note: the recorder writes Events asynchronously, in the order they were recorded; the
		// Machine going does not wait for them. HookReleased on the Machine is the last Event of
		// its removal flow: once it is written, every MemberRemoved recorded before it is too.
		g.Eventually(func(g Gomega) []string { return machineEventReasons(ctx, g, o, name) }).WithTimeout(time.Minute).WithPolling(250*time.Millisecond).
			Should(ContainElement(v1alpha1.EventHookReleased), "[%s] etcd-adapter must have released the hook of Machine %s", step, name)
		g.Expect(removedEvents(ctx, g, o, name)).To(Equal(1), "[%s] etcd-adapter must have removed member %s once", step, name)
	}
	fmt.Printf("[%s] etcd lost members %v, each once; etcd-adapter removed each (one MemberRemoved Event per member)\n", step, removed)
	expectBothHooks(ctx, g, o)
}

// preTerminateHooks lists the Machine's pre-terminate hook keys.
func preTerminateHooks(m *clusterv1.Machine) []string {
	var out []string
	for k := range m.Annotations {
		if strings.HasPrefix(k, clusterv1.PreTerminateDeleteHookAnnotationPrefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// adapterProgress says what etcd-adapter's Progressing condition says, for a failed wait.
func adapterProgress(ctx context.Context, o *observer) string {
	cpe, err := o.controlPlaneEtcd(ctx)
	if err != nil || cpe == nil {
		return fmt.Sprintf("ControlPlaneEtcd: %v", err)
	}
	if c := conditions.Get(cpe, v1alpha1.ProgressingCondition); c != nil {
		return fmt.Sprintf("ControlPlaneEtcd Progressing=%s %s: %s\n", c.Status, c.Reason, c.Message)
	}
	return "ControlPlaneEtcd has no Progressing condition\n"
}

// removedEvents counts etcd-adapter's MemberRemoved Events (with their repeat counts) on the
// ControlPlaneEtcd about the member of Machine name (kubeadm members are named after the Node,
// which is named after the Machine here).
func removedEvents(ctx context.Context, g Gomega, o *observer, name string) int {
	list := &corev1.EventList{}
	g.Expect(o.e.Management.Client.List(ctx, list, client.InNamespace(o.e.Cluster.Namespace))).To(Succeed())
	n := 0
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == "ControlPlaneEtcd" && ev.Reason == v1alpha1.EventMemberRemoved &&
			strings.Contains(ev.Message, "Removed etcd member "+name+" ") {
			n += int(max(ev.Count, 1))
		}
	}
	return n
}

// machineEventReasons lists the reasons of the Events about Machine name.
func machineEventReasons(ctx context.Context, g Gomega, o *observer, name string) []string {
	list := &corev1.EventList{}
	g.Expect(o.e.Management.Client.List(ctx, list, client.InNamespace(o.e.Cluster.Namespace))).To(Succeed())
	var out []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == "Machine" && ev.InvolvedObject.Name == name {
			out = append(out, ev.Reason)
		}
	}
	return out
}

// membershipLog polls etcd's member list (through the running voters) and records every member
// that leaves it, in order: what etcd itself saw change, whoever asked for it.
type membershipLog struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	last    []string
	removed []string
}

// membershipPoll is how often the member list is read.
const membershipPoll = 200 * time.Millisecond

func startMembershipLog(ctx context.Context, g Gomega, e *kcpenv.Env) *membershipLog {
	first, err := e.EtcdMembers(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(ctx)
	l := &membershipLog{cancel: cancel, done: make(chan struct{}), last: first}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(membershipPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			callCtx, cancelCall := context.WithTimeout(ctx, 10*time.Second)
			names, err := e.EtcdMembers(callCtx)
			cancelCall()
			if err == nil {
				l.observe(names)
			}
		}
	}()
	return l
}

func (l *membershipLog) observe(names []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.last {
		if n != "" && !slices.Contains(names, n) {
			l.removed = append(l.removed, n)
		}
	}
	l.last = names
}

func (l *membershipLog) removals() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.removed)
}

func (l *membershipLog) stop() {
	l.cancel()
	<-l.done
}
