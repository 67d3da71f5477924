package clusterctl

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter/manager"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// TestDeployedReplicasLeaderKill runs the Deployment's two replicas as processes, installed as
// TestInstallWithCertManager installs them (real cert-manager, the webhooks called through their
// Service, which balances between both replicas), with leader election in the Deployment's
// namespace. A control-plane Machine of a K3s workload cluster is deleted, and once the removal
// of its etcd member is under way (status.removal set) the replica holding the Lease is killed
// with SIGKILL, as a node failure ends it. The other replica takes the Lease once it expires and
// completes the removal: the Machine is gone, etcd lists the two other members. Admissions
// polled throughout (the hook webhook, failurePolicy Fail) are all answered, with the hook, but
// for the requests on the killed replica's connections at the kill (see the end of the test).
func TestDeployedReplicasLeaderKill(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	k := startK3s(ctx, t) // stopped last, after the management cluster that watches it
	in := installWithCertManager(ctx, t)
	in.injectCA(ctx, t)
	m := in.m

	replicas, _, _ := in.startTwoReplicas(ctx, t, g)
	c, machines := registerHealthyK3s(ctx, g, m, k, "replicas")

	leader, holder := m.leader(ctx, g, replicas)
	other := replicas[1-leader]
	probe := m.hookedCluster(ctx, g)
	poll := m.pollAdmissions(ctx, probe)

	doomed := machines[2]
	startRemoval(ctx, g, m, c, doomed)
	killed := time.Now()
	g.Expect(replicas[leader].Kill()).To(Succeed())
	// Only the leader releases the hook, so a hook still on the Machine after the kill is a removal
	// the killed replica had not finished.
	atKill := &clusterv1.Machine{}
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(doomed), atKill)).To(Succeed())
	g.Expect(atKill.Annotations).To(HaveKey(v1alpha1.PreTerminateHookAnnotation), "the removal was unfinished at the kill")

	g.Eventually(func(g Gomega) string { return m.leaseHolder(ctx, g) }, 2*time.Minute).ShouldNot(Equal(holder), "the other replica takes the Lease")
	t.Logf("the other replica took the Lease %s after the kill (Lease duration %s, retry period %s)",
		time.Since(killed).Round(time.Millisecond), manager.NewOptions().LeaderElectionLeaseDuration, manager.NewOptions().LeaderElectionRetryPeriod)
	g.Expect(other.running()).To(BeTrue())
	g.Eventually(func() bool {
		err := m.Client.Get(ctx, client.ObjectKeyFromObject(doomed), &clusterv1.Machine{})
		return apierrors.IsNotFound(err)
	}, 3*time.Minute).Should(BeTrue(), "the removal completes and the Machine is deleted")
	members, err := k.Etcd.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(members).To(HaveLen(2), "etcd lists the two other members")

	ok, failures := poll.stop()
	t.Logf("%d admissions during the removal and the take-over; failed: %q", ok, failures)
	g.Expect(ok).To(BeNumerically(">", 0))
	// kube-apiserver does not retry a webhook call (k8s.io/apiserver
	// pkg/admission/plugin/webhook/mutating/dispatcher.go calls the hook once), so a request it
	// sent on a connection of the killed replica, in flight or on a pooled connection the kill
	// closed, fails with the connection, and so does one dialled to it in the moment before its
	// endpoint left (the connection refused, the Service stand-in's 502); that is a Pod's SIGKILL
	// in a cluster too. Every other
	// admission, all asked once kube-apiserver dropped those connections, was answered by the
	// other replica, with the hook.
	g.Expect(len(failures)).To(BeNumerically("<=", 2), "at most the requests on the killed replica's connections")
	for i, f := range failures {
		g.Expect(f).To(MatchRegexp(`EOF|connection reset by peer|broken pipe|502 Bad Gateway`), "a connection ended by the kill")
		g.Expect(poll.failed[i]).To(BeTemporally("~", killed, 5*time.Second), "asked at the kill")
	}
}

// running reports whether the replica's process has not ended (its container is Ready).
func (r *replica) running() bool {
	select {
	case <-r.Done():
		return false
	default:
		return true
	}
}

// leaseHolder returns the holder of the manager's Lease in the Deployment's namespace.
func (m *management) leaseHolder(ctx context.Context, g Gomega) string {
	l := &coordinationv1.Lease{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: manager.DefaultLeaderElectionID}, l)).To(Succeed())
	g.Expect(l.Spec.HolderIdentity).NotTo(BeNil())
	return *l.Spec.HolderIdentity
}

// leader returns which replica holds the Lease, and its identity: the replica whose log records
// the LeaderElection Event "<identity> became leader" of the Lease's holder (controller-runtime's
// identity is the host name and a random suffix, the same host for both processes).
func (m *management) leader(ctx context.Context, g Gomega, replicas []*replica) (int, string) {
	var leader int
	var holder string
	g.Eventually(func(g Gomega) []int {
		holder = m.leaseHolder(ctx, g)
		var found []int
		for i, r := range replicas {
			b, err := os.ReadFile(r.Log)
			g.Expect(err).NotTo(HaveOccurred())
			if strings.Contains(string(b), holder+" became leader") {
				found = append(found, i)
			}
		}
		if len(found) == 1 {
			leader = found[0]
		}
		return found
	}, 2*time.Minute).Should(HaveLen(1), "one replica holds the Lease")
	return leader, holder
}

// startTwoReplicas starts the Deployment's two replicas as processes, both behind the webhook
// Service, each its endpoint while its process runs. It returns them, the Service's address and
// their backends, in the replicas' order.
func (in *certManagerInstall) startTwoReplicas(ctx context.Context, t *testing.T, g Gomega) ([]*replica, string, []string) {
	m, d := in.m, in.deployment
	replicas := []*replica{
		m.startReplica(ctx, t, in.bin, d, in.logs, "replica-0"),
		m.startReplica(ctx, t, in.bin, d, in.logs, "replica-1"),
	}
	webhookAddr, backends := m.serviceBackends(ctx, g, d, webhookService, replicas...)
	for i, r := range replicas {
		in.network.readiness(backends[i], r.running)
	}
	in.network.route(webhookAddr, backends...)
	return replicas, webhookAddr, backends
}

// registerHealthyK3s registers the K3s workload cluster in a new namespace and returns once the
// hook webhook has hooked its control-plane Machines and etcd-adapter reports its three members
// healthy.
func registerHealthyK3s(ctx context.Context, g Gomega, m *management, k *workload.K3s, namespace string) (*clusterv1.Cluster, []*clusterv1.Machine) {
	ns := createNamespace(ctx, g, m, namespace)
	c, machines := registerK3s(ctx, g, m, k, ns, "k3s")
	g.Expect(hooked(ctx, g, m.Client, ns)).To(ConsistOf(names(machines)), "the hook webhook put the hook on every Machine")
	g.Eventually(func(g Gomega) int32 { return healthyMembers(ctx, g, m.Client, ns, c.Name) }, 2*time.Minute).Should(BeEquivalentTo(3))
	return c, machines
}

// startRemoval deletes the Machine and returns once the removal of its etcd member is under way
// (the ControlPlaneEtcd's status.removal set).
func startRemoval(ctx context.Context, g Gomega, m *management, c *clusterv1.Cluster, doomed *clusterv1.Machine) {
	g.Expect(m.Client.Delete(ctx, doomed.DeepCopy())).To(Succeed())
	g.Eventually(func(g Gomega) *v1alpha1.MemberRemovalStatus {
		cpe := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(c), cpe)).To(Succeed())
		return cpe.Status.Removal
	}, 2*time.Minute, 50*time.Millisecond).ShouldNot(BeNil(), "the removal of the Machine's member is under way")
}
