package clusterctl

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-base/logs"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter/manager"
)

// endpointPropagation is how long a deleted Pod still gets new connections through its Service:
// the EndpointSlice controller marks its endpoint terminating and not ready once the Pod has its
// deletionTimestamp (KEP-1672, k8s.io/kubernetes pkg/controller/endpointslice), and kube-proxy
// stops sending new connections to it on its next sync (KEP-1669: to a terminating endpoint only
// when no ready one is left), within a second or two. Connections already open stay with the Pod.
const endpointPropagation = 2 * time.Second

// minimumGracePeriod is the least time the kubelet leaves a container between SIGTERM and
// SIGKILL, whatever its preStop hook took (minimumGracePeriodInSeconds, k8s.io/kubernetes
// pkg/kubelet/kuberuntime/kuberuntime_container.go).
const minimumGracePeriod = 2 * time.Second

// pollers is how many clients ask for admissions, each on its own clock: kube-apiserver calls
// the webhook for each on a connection of its own, from its pool (net/http's Transport keeps idle
// connections per host, the Service) or newly dialled, so its pool holds connections to both
// replicas and it dials new ones when the admissions overlap more than its pool holds.
const pollers = 6

// TestDeployedReplicasGracefulEnd runs the Deployment's two replicas as
// TestDeployedReplicasLeaderKill does, and ends the replica holding the Lease during a removal
// the way a rolling update, a drain or `kubectl delete pod` ends a Pod (podTermination.end): its
// endpoint leaves the Service after endpointPropagation, while the kubelet runs the container's
// preStop hook, sends SIGTERM, and SIGKILL only after the grace period, all read from the rendered
// Deployment. The replica drains for its --shutdown-delay, stops by itself within the grace
// period and releases the Lease, the other takes it, the removal completes, and not one of the
// admissions polled throughout by several clients fails or goes without the hook.
func TestDeployedReplicasGracefulEnd(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	k := startK3s(ctx, t) // stopped last, after the management cluster that watches it
	in := installWithCertManager(ctx, t)
	in.injectCA(ctx, t)
	m, d := in.m, in.deployment
	term := terminationOf(g, d)
	delay := shutdownDelay(g, d)
	t.Logf("the Deployment's Pod ends with a preStop sleep of %s and a grace period of %s; the manager's shutdown delay is %s", term.preStop, term.grace, delay)
	g.Expect(term.preStop+delay).To(BeNumerically("<", term.grace), "the manager's drain ends before the kubelet's SIGKILL")

	replicas, webhookAddr, backends := in.startTwoReplicas(ctx, t, g)
	c, machines := registerHealthyK3s(ctx, g, m, k, "graceful")

	leader, holder := m.leader(ctx, g, replicas)
	probe := m.hookedCluster(ctx, g)
	var polls []*admissionPoll
	for range pollers {
		polls = append(polls, m.pollAdmissions(ctx, probe))
	}

	doomed := machines[2]
	startRemoval(ctx, g, m, c, doomed)

	connects := in.network.connected(webhookAddr)
	t.Logf("at the Pod's deletion kube-apiserver holds %d connections to the ending replica, %d to the other", established(g, backends[leader]), established(g, backends[1-leader]))
	end := term.end(ctx, g, in.network, backends[leader], replicas[leader])
	t.Logf("kube-apiserver opened %d connections to the webhook Service from the Pod's deletion to its exit", in.network.connected(webhookAddr)-connects)
	t.Logf("the leader got SIGTERM %s after its Pod's deletion, holding %d of kube-apiserver's connections, and exited %s after it (SIGKILL needed: %t)",
		end.signalled.Sub(end.deleted).Round(time.Millisecond), end.pooled, end.exited.Sub(end.signalled).Round(time.Millisecond), end.killed)
	g.Expect(end.killed).To(BeFalse(), "the manager stops by itself within the grace period")
	atExit := &clusterv1.Machine{}
	err := m.Client.Get(ctx, client.ObjectKeyFromObject(doomed), atExit)
	t.Logf("at the leader's exit the removal was finished: %t", apierrors.IsNotFound(err) || atExit.Annotations[v1alpha1.PreTerminateHookAnnotation] == "")
	g.Expect(m.leaseHolder(ctx, g)).NotTo(Equal(holder), "the ending leader released the Lease (LeaderElectionReleaseOnCancel) instead of leaving it to expire")

	g.Eventually(func(g Gomega) string { return m.leaseHolder(ctx, g) }, 2*time.Minute).ShouldNot(BeElementOf(holder, ""), "a replica takes the released Lease")
	other, _ := m.leader(ctx, g, replicas)
	g.Expect(other).To(Equal(1-leader), "the other replica holds the Lease")
	g.Eventually(func() bool {
		err := m.Client.Get(ctx, client.ObjectKeyFromObject(doomed), &clusterv1.Machine{})
		return apierrors.IsNotFound(err)
	}, 3*time.Minute).Should(BeTrue(), "the removal completes and the Machine is deleted")
	members, err := k.Etcd.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(members).To(HaveLen(2), "etcd lists the two other members")

	var ok int
	var failures []string
	for _, p := range polls {
		n, f := p.stop()
		ok, failures = ok+n, append(failures, f...)
	}
	t.Logf("%d admissions during the removal and the leader's end; failed: %q", ok, failures)
	g.Expect(ok).To(BeNumerically(">", 0))
	g.Expect(failures).To(BeEmpty(), "a Pod ended as Kubernetes ends it loses no admission")
}

// podTermination is how the kubelet ends the Deployment's Pod, from its rendered template.
type podTermination struct {
	// preStop is the container's preStop sleep action (0 without a preStop hook).
	preStop time.Duration
	// grace is the Pod's terminationGracePeriodSeconds.
	grace time.Duration
}

// terminationOf reads the Pod's termination from d. Only the sleep action is played: an exec or
// httpGet preStop hook would need the container's image or a route to the Pod.
func terminationOf(g Gomega, d *appsv1.Deployment) podTermination {
	pod := d.Spec.Template.Spec
	g.Expect(pod.TerminationGracePeriodSeconds).NotTo(BeNil(), "the Deployment sets terminationGracePeriodSeconds")
	t := podTermination{grace: time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second}
	if l := pod.Containers[0].Lifecycle; l != nil && l.PreStop != nil {
		g.Expect(l.PreStop.Exec).To(BeNil(), "only a preStop sleep action is played")
		g.Expect(l.PreStop.HTTPGet).To(BeNil(), "only a preStop sleep action is played")
		g.Expect(l.PreStop.Sleep).NotTo(BeNil(), "only a preStop sleep action is played")
		t.preStop = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
	}
	return t
}

// shutdownDelay returns the manager's --shutdown-delay as the Deployment's container sets it.
func shutdownDelay(g Gomega, d *appsv1.Deployment) time.Duration {
	o := manager.NewOptions()
	fs := manager.NewFlagSet(o, logs.NewOptions())
	g.Expect(fs.Parse(d.Spec.Template.Spec.Containers[0].Args)).To(Succeed())
	return o.ShutdownDelay
}

// podEnd is when the Pod's end happened.
type podEnd struct {
	deleted, signalled, exited time.Time
	// killed is true when the process was still running at the end of the grace period.
	killed bool
	// pooled is how many connections kube-apiserver held to the Pod at SIGTERM.
	pooled int
}

// end ends replica r, the Service's backend, as Kubernetes ends a deleted Pod. Two things start
// at its deletionTimestamp, independently: its endpoint leaves the Service after
// endpointPropagation (connections already open stay), and the kubelet kills the container
// (killContainer, k8s.io/kubernetes v1.36.3 pkg/kubelet/kuberuntime/kuberuntime_container.go):
// the preStop hook first, bounded by the grace period, then StopContainer with what is left of
// the grace period (the whole seconds the hook took deducted, at least minimumGracePeriod), which
// is SIGTERM and, if the process is still running when that ends, SIGKILL.
func (p podTermination) end(ctx context.Context, g Gomega, n *serviceNetwork, backend string, r *replica) podEnd {
	// The endpoint leaves when the deletion has propagated, whether the process still runs or
	// not: until then kube-proxy sends new connections to the Pod even after its container
	// ended, and they are refused.
	var gone atomic.Bool
	n.readiness(backend, func() bool { return !gone.Load() })
	e := podEnd{deleted: time.Now()}
	time.AfterFunc(endpointPropagation, func() { gone.Store(true) })

	grace := p.grace
	if p.preStop > 0 {
		hook := min(p.preStop, grace)
		select {
		case <-ctx.Done():
		case <-time.After(hook):
		}
		grace -= time.Since(e.deleted).Truncate(time.Second)
	}
	grace = max(grace, minimumGracePeriod)

	e.pooled = established(g, backend)
	e.signalled = time.Now()
	g.Expect(syscall.Kill(r.Pid(), syscall.SIGTERM)).To(Succeed())
	select {
	case <-r.Done():
	case <-time.After(grace):
		e.killed = true
		g.Expect(r.Kill()).To(Succeed())
	}
	e.exited = time.Now()
	return e
}

// established counts the established TCP connections accepted on the loopback address addr
// (host:port), from the kernel's table (/proc/net/tcp): kube-apiserver's connections to that
// backend, open or pooled.
func established(g Gomega, addr string) int {
	host, port, err := net.SplitHostPort(addr)
	g.Expect(err).NotTo(HaveOccurred())
	ip := net.ParseIP(host).To4()
	g.Expect(ip).NotTo(BeNil(), "an IPv4 address")
	p, err := strconv.Atoi(port)
	g.Expect(err).NotTo(HaveOccurred())
	// The table prints an IPv4 address as its 32-bit value in the host's byte order (little
	// endian here), then the port.
	local := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], p)
	b, err := os.ReadFile("/proc/net/tcp")
	g.Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[1] == local && f[3] == "01" {
			n++
		}
	}
	return n
}
