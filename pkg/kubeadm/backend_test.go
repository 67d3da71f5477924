package kubeadm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/goleak"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// observeHealthy observes and expects every member to have answered.
func observeHealthy(ctx context.Context, g Gomega, b *Backend, n int) *etcd.Snapshot {
	s, err := b.Observe(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Members).To(HaveLen(n))
	g.Expect(s.Evidence).To(HaveLen(n))
	for _, ev := range s.Evidence {
		g.Expect(ev.Contact).To(Equal(etcd.ContactAnswered), "Node %s: %s", ev.NodeName, ev.Error)
	}
	return s
}

func TestBackend_connections(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w := startWorkloadCluster(t, workload, 3)
	// Goroutines that exist now belong to the environment; everything the backend starts must
	// be gone after Close.
	leakOpts := []goleak.Option{goleak.IgnoreCurrent()}
	b, err := New(Config{Cluster: w.key, ClusterUID: typesUID(w.uid), RESTConfig: FromClusterCache(mgmt.ClusterCache, w.key),
		Client: secretClient, IdleTimeout: time.Second})
	g.Expect(err).NotTo(HaveOccurred())

	t.Log("connections are reused across observations")
	observeHealthy(ctx, g, b, 3)
	first := b.pool.snapshotClients()
	g.Expect(first).To(HaveLen(3))
	observeHealthy(ctx, g, b, 3)
	g.Expect(b.pool.snapshotClients()).To(Equal(first))

	t.Log("a broken port-forward is replaced: the next observation still hears every member")
	// Retarget to the same member closes the open forwards, as a kubelet restart does.
	w.kubelet(w.nodes[0]).Retarget(kubelet.EtcdPort, w.etcd.MemberOnNode(w.nodes[0]).ClientAddress())
	observeHealthy(ctx, g, b, 3)

	t.Log("idle connections are evicted")
	g.Eventually(b.pool.size).WithTimeout(10 * time.Second).Should(BeZero())
	observeHealthy(ctx, g, b, 3)

	t.Log("Close closes everything and leaks no goroutine")
	g.Expect(b.Close()).To(Succeed())
	g.Expect(b.Close()).To(Succeed(), "idempotent")
	_, err = b.Observe(ctx)
	g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue(), "closed: %v", err)
	// The other ends (kubelet stand-in, etcd) and the environment's own clients run in this
	// process too, so only client-side goroutines of the kinds the backend starts count.
	g.Eventually(func() []string { return clientLeaks(goleak.Find(leakOpts...)) }).
		WithTimeout(20 * time.Second).WithPolling(time.Second).Should(BeEmpty())
}

// clientMarkers are stack frames only a client (the backend) has: clientv3, gRPC's client
// transport, client-go's port-forward tunnel, this package and its port-forward transport.
var clientMarkers = []string{
	"etcd-adapter/pkg/kubeadm.", "etcd-adapter/pkg/kubeadm/internal/portforward.", "go.etcd.io/etcd/client/v3.", "grpc.(*ClientConn)", "grpc.(*addrConn)",
	"grpc/internal/transport.(*http2Client)", "k8s.io/client-go/tools/portforward.",
}

// clientLeaks returns the goroutines goleak found that belong to a client.
func clientLeaks(err error) []string {
	if err == nil {
		return nil
	}
	var leaks []string
	for _, g := range strings.Split(err.Error(), "Goroutine ")[1:] {
		for _, m := range clientMarkers {
			if strings.Contains(g, m) {
				leaks = append(leaks, "Goroutine "+g)
				break
			}
		}
	}
	return leaks
}

func TestBackend_serverNameIsVerified(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w := startWorkloadCluster(t, workload, 3)
	b := w.backend(t)
	observeHealthy(ctx, g, b, 3)

	// Node 0's etcd Pod now reaches the member of Node 1: its certificate chains to the right
	// CA but names another Node.
	w.kubelet(w.nodes[0]).Retarget(kubelet.EtcdPort, w.etcd.MemberOnNode(w.nodes[1]).ClientAddress())
	g.Eventually(func(g Gomega) {
		s, err := b.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		m, _ := s.MemberByNode(w.nodes[0])
		ev, _ := s.EvidenceFor(m.ID)
		g.Expect(ev.Contact).To(Equal(etcd.ContactUnreachable))
		g.Expect(ev.Error).To(ContainSubstring("does not name the Node"))
		g.Expect(ev.Error).To(ContainSubstring("certificate is valid for " + w.nodes[1]))
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

func TestBackend_MoveLeader_invalidTarget(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w := startWorkloadCluster(t, workload, 3)
	b := w.backend(t)
	s := observeHealthy(ctx, g, b, 3)
	leader, _ := s.MemberByID(s.LeaderID)
	_, err := b.MoveLeader(ctx, leader, etcd.Member{ID: 12345, Name: "no-such-member"})
	g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue(), "%v", err)
	mv, err := b.MoveLeader(ctx, etcd.Member{ID: 12345, Name: "no-such-member"}, leader)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mv.Outcome).To(Equal(etcd.LeaderNotOnNode))
}

func TestBackend_MoveLeaderToCandidates(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w := startWorkloadCluster(t, workload, 3)
	// A call timeout no test outlives: had the backend sent MoveLeader towards the dead
	// candidate, etcd would wait for the transfer until the call timeout and the test would
	// hang instead of passing.
	b := w.backend(t, func(c *Config) { c.CallTimeout = time.Hour })
	s := observeHealthy(ctx, g, b, 3)
	leader, _ := s.MemberByID(s.LeaderID)
	var followers []etcd.Member
	for _, m := range s.Members {
		if m.ID != leader.ID {
			followers = append(followers, m)
		}
	}
	// The first candidate is down: it is skipped without asking etcd to transfer to it.
	g.Expect(w.etcd.MemberOnNode(followers[0].NodeName).Kill()).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := b.MoveLeader(ctx, leader, followers[0])
		g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("is not answering; not moving leadership to it"), "refused before etcd was asked")
	}).WithTimeout(20 * time.Second).Should(Succeed())
	to, mv, err := b.MoveLeaderToCandidates(ctx, leader, followers)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mv.Outcome).To(Equal(etcd.LeaderMoved))
	g.Expect(to.ID).To(Equal(followers[1].ID))
	g.Eventually(func(g Gomega) {
		s, err := b.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.LeaderID).To(Equal(followers[1].ID))
	}).WithTimeout(10 * time.Second).Should(Succeed())

	to, mv, err = b.MoveLeaderToCandidates(ctx, leader, followers)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mv.Outcome).To(Equal(etcd.LeaderNotOnNode), "no-op once the leaving member does not lead")
	g.Expect(to).To(BeZero())

	_, _, err = b.MoveLeaderToCandidates(ctx, followers[1], []etcd.Member{followers[0]})
	g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "%v", err)
	_, _, err = b.MoveLeaderToCandidates(ctx, followers[1], nil)
	g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue(), "%v", err)
}
