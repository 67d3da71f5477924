package kcp

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	kcpenv "github.com/etcd-adapter/etcd-adapter/test/env/kcp"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// nodeFirstVersion is a Kubernetes version whose kubeadm has ControlPlaneKubeletLocalMode
// (beta, on by default) and still lets it be turned off; from v1.36 it is GA and cannot.
const nodeFirstVersion = "v1.35.3"

// joinObservationInterval is the ControlPlaneEtcd's spec.observationInterval in this test: a
// pass at least every 2 s besides those on Machine and Node events.
const joinObservationInterval = 2 * time.Second

// etcdPull is how long a joining Node's etcd takes to start after its learner was added (the
// image pull): six observation intervals, yet below KCP v1.14.2's own grace for a learner with
// no name (20 s from the Node's creation, see kcpenv.Options.EtcdStartDelay), so that a
// learner lost is lost to etcd-adapter.
const etcdPull = 6 * joinObservationInterval

// TestKCPJoinNodeFirst runs KubeadmControlPlane v1.14.2 for Kubernetes v1.35 with kubeadm's
// ControlPlaneKubeletLocalMode turned off in its ClusterConfiguration, and etcd-adapter's
// ControlPlaneEtcd in Manage mode, so its ghost-member cleanup runs while KCP joins Machines.
// Without the gate `kubeadm join --control-plane` registers the Node before it adds the etcd
// learner: its phases (k8s.io/kubernetes cmd/kubeadm/app/cmd/join.go) run kubelet-start, which
// in v1.32 cmd/kubeadm/app/cmd/phases/join/kubelet.go runKubeletStartJoinPhase waits for the
// kubelet's TLS bootstrap (runKubeletWaitBootstrapPhase) when the gate is off, and only then
// control-plane-join, which adds the learner, starts etcd and promotes it. The harness reads
// the gate from the kubeadm-config ConfigMap, as kubeadm join does, and plays that order.
//
// Each joining Node has an address of its own, which its learner's peer URL uses, as kubeadm
// advertises the Node's address; the learner is added not started, and starts etcdPull later
// (the etcd image pull) and not before its Machine has its nodeRef: several of etcd-adapter's
// passes (spec.observationInterval, and every Machine event) see it not started on a bound
// Machine's Node, the window in which a rule that takes every not-started member for a ghost
// once every Machine is bound removes it.
//
// KCP scales 1->3 and then remediates a Machine a MachineHealthCheck marked, which deletes it
// and joins a new one. Each join plays Node first; from etcd itself, each joining learner is
// listed not started on its Node's address, never removed, and promoted, while the
// ControlPlaneEtcd says WaitingForMemberJoin; etcd's member list ends with exactly the
// Machines' members; etcd-adapter never removes a joining member (no GhostMemberRemoved Event,
// no member lost but the remediated Machine's).
func TestKCPJoinNodeFirst(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	start := time.Now()
	e, err := kcpenv.Start(ctx, kcpenv.Options{
		EtcdAdapter:         true,
		KubernetesVersion:   nodeFirstVersion,
		KubeadmFeatureGates: map[string]bool{"ControlPlaneKubeletLocalMode": false},
		EtcdStartDelay:      etcdPull,
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(e.Stop()).To(Succeed()) })

	_, err = e.CreateControlPlane(ctx, 1)
	g.Expect(err).NotTo(HaveOccurred())
	waitAvailable(ctx, g, e, 1)
	expectGateOff(ctx, g, e)
	o := &observer{e: e}
	manageControlPlaneEtcd(ctx, g, o)
	setObservationInterval(ctx, g, o, joinObservationInterval)
	members := startMembershipLog(ctx, g, e)
	defer members.stop()
	joins := startJoinWatch(ctx, o)
	defer joins.stop()
	fmt.Printf("[node first] 1 replica Available, ControlPlaneEtcd in Manage after %v\n", time.Since(start).Round(time.Millisecond))

	joined := scaleUpNodeFirst(ctx, g, o, members, joins)
	expectNodeFirst(g, e, joined)
	expectJoinsFromEtcd(ctx, g, e, joins, joined)
	expectNoGhostRemoval(ctx, g, e)

	mhc := createMachineHealthCheck(ctx, g, e)
	before := o.machineNames(ctx, g)
	victim := before[0]
	manageStep(ctx, g, o, members, "remediation", 3, func() {
		g.Expect(e.NodeNotReady(ctx, victim)).To(Succeed())
	})
	waitMHCHealthy(ctx, g, e, mhc, 3)
	replacement := without(o.machineNames(ctx, g), before)
	g.Expect(replacement).To(HaveLen(1))
	expectNodeFirst(g, e, replacement)
	expectJoinsFromEtcd(ctx, g, e, joins, replacement)
	expectNoGhostRemoval(ctx, g, e)
	fmt.Printf("TestKCPJoinNodeFirst took %v\n", time.Since(start).Round(time.Millisecond))
}

// expectGateOff checks the ClusterConfiguration that KCP's `kubeadm init` uploaded (what
// kubeadm join reads) for this test's premise: v1.35 with ControlPlaneKubeletLocalMode off.
func expectGateOff(ctx context.Context, g Gomega, e *kcpenv.Env) {
	cm := &corev1.ConfigMap{}
	g.Expect(e.WorkloadClient().Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "kubeadm-config"}, cm)).To(Succeed())
	cfg := struct {
		KubernetesVersion string          `json:"kubernetesVersion"`
		FeatureGates      map[string]bool `json:"featureGates"`
	}{}
	g.Expect(yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), &cfg)).To(Succeed())
	g.Expect(cfg.KubernetesVersion).To(Equal(nodeFirstVersion))
	g.Expect(cfg.FeatureGates).To(HaveKeyWithValue("ControlPlaneKubeletLocalMode", false))
}

// scaleUpNodeFirst scales KCP 1->3 and waits until it is done; etcd then lists exactly the
// Machines' members and lost none on the way. It returns the Machines KCP added.
func scaleUpNodeFirst(ctx context.Context, g Gomega, o *observer, members *membershipLog, joins *joinWatch) []string {
	before := o.machineNames(ctx, g)
	start := time.Now()
	updateKCP(ctx, g, o.e, func(kcp *controlplanev1.KubeadmControlPlane) { kcp.Spec.Replicas = ptr.To[int32](3) })
	g.Eventually(func(g Gomega) {
		ms := o.machineNames(ctx, g)
		expectJoinsRunning(o.e, joins, ms)
		g.Expect(ms).To(HaveLen(3))
		for _, m := range without(ms, before) {
			g.Expect(o.e.JoinSteps(m)).To(Equal(workload.JoinNodeFirst.Steps()), "join of Machine %s", m)
		}
	}).WithTimeout(2*waitTimeout).WithPolling(250*time.Millisecond).Should(Succeed(), func() string { return dump(ctx, o.e) + adapterProgress(ctx, o) })
	g.Eventually(func(g Gomega) {
		kcp := waitAvailable(ctx, g, o.e, 3)
		g.Expect(kcp.Status.ObservedGeneration).To(Equal(kcp.Generation))
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneScalingUpCondition)).To(BeTrue())
		g.Expect(o.machineNames(ctx, g)).To(HaveLen(3))
	}).WithTimeout(2*waitTimeout).WithPolling(250*time.Millisecond).Should(Succeed(), func() string { return dump(ctx, o.e) + adapterProgress(ctx, o) })
	after := o.machineNames(ctx, g)
	g.Eventually(func(g Gomega) {
		current, err := o.e.EtcdMembers(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(current).To(Equal(after))
	}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	g.Expect(members.removals()).To(BeEmpty(), "no member may leave etcd while KCP scales up")
	expectBothHooks(ctx, g, o)
	joined := without(after, before)
	fmt.Printf("[scale 1->3] took %v (Machines %v -> %v)\n", time.Since(start).Round(time.Millisecond), before, after)
	return joined
}

// expectNodeFirst asserts that each Machine's join played kubeadm's steps without
// ControlPlaneKubeletLocalMode: the Node registered before the learner was added.
func expectNodeFirst(g Gomega, e *kcpenv.Env, machines []string) {
	g.Expect(machines).NotTo(BeEmpty())
	for _, m := range machines {
		g.Expect(e.JoinSteps(m)).To(Equal(workload.JoinNodeFirst.Steps()), "join of Machine %s", m)
	}
	fmt.Printf("joins of %v played %v\n", machines, workload.JoinNodeFirst.Steps())
}

// expectNoGhostRemoval asserts that etcd-adapter recorded no GhostMemberRemoved Event: it took
// no joining member for a ghost.
func expectNoGhostRemoval(ctx context.Context, g Gomega, e *kcpenv.Env) {
	list := &corev1.EventList{}
	g.Expect(e.Management.Client.List(ctx, list, client.InNamespace(e.Cluster.Namespace))).To(Succeed())
	for _, ev := range list.Items {
		g.Expect(ev.Reason).NotTo(Equal(v1alpha1.EventGhostMemberRemoved), "Event on %s %s: %s", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message)
	}
}

// setObservationInterval sets the ControlPlaneEtcd's spec.observationInterval.
func setObservationInterval(ctx context.Context, g Gomega, o *observer, d time.Duration) {
	cpe, err := o.controlPlaneEtcd(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cpe).NotTo(BeNil())
	patch := client.MergeFrom(cpe.DeepCopy())
	cpe.Spec.ObservationInterval = &metav1.Duration{Duration: d}
	g.Expect(o.e.Management.Client.Patch(ctx, cpe, patch)).To(Succeed())
}
