package k3sbackend_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

// TestBackend_staleHeartbeat stops the leader's EtcdIsVoter writer: once the heartbeat is
// older than the refresh rule allows, every member is Unknown saying K3s stopped reporting,
// never healthy; when K3s reports again, they are healthy again.
func TestBackend_staleHeartbeat(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startCluster(t, "v1.33.4+k3s1", 3, clusterOptions{heartbeat: 2 * time.Second})
	g.Expect(c.backend.Observe(ctx)).To(WithTransform(healthOf(c.nodes), Equal(v1alpha1.EtcdClusterHealthyReason)))

	c.sim.StopConditionWriter()
	stopped := time.Now()
	var s *etcd.Snapshot
	g.Eventually(func(g Gomega) {
		var err error
		s, err = c.backend.Observe(ctx)
		g.Expect(err).ToNot(HaveOccurred())
		g.Expect(s.Members).To(HaveLen(3))
		for _, ev := range s.Evidence {
			g.Expect(ev.Contact).To(Equal(etcd.ContactUnknown))
			g.Expect(ev.Error).To(ContainSubstring("stopped reporting"))
		}
	}, waitTimeout, pollInterval).Should(Succeed())
	t.Logf("all members Unknown %v after the condition writer stopped: %s", time.Since(stopped).Round(time.Millisecond), s.Evidence[0].Error)
	for _, mh := range etcd.AssessMembers(s, time.Now()) {
		g.Expect(mh.Health).To(Equal(etcd.Unknown))
	}
	g.Expect(healthOf(c.nodes)(s)).To(Equal(v1alpha1.EtcdClusterHealthUnknownReason))
	g.Expect(etcd.CanRemoveMember(s, time.Now(), c.memberOf(c.nodes[0])).Allowed).To(BeFalse())

	c.sim.StartConditionWriter()
	g.Eventually(func(g Gomega) {
		s, err := c.backend.Observe(ctx)
		g.Expect(err).ToNot(HaveOccurred())
		g.Expect(healthOf(c.nodes)(s)).To(Equal(v1alpha1.EtcdClusterHealthyReason))
	}, waitTimeout, pollInterval).Should(Succeed())
}

// requestAge reads how long ago the removal was requested from an InProgress reason.
func requestAge(g Gomega, reason string) time.Duration {
	m := regexp.MustCompile(`was set (\S+) ago`).FindStringSubmatch(reason)
	g.Expect(m).To(HaveLen(2), "no request age in %q", reason)
	d, err := time.ParseDuration(m[1])
	g.Expect(err).ToNot(HaveOccurred())
	return d
}

// healthOf returns the EtcdClusterHealthy reason of a snapshot for Machines on nodes.
func healthOf(nodes []string) func(*etcd.Snapshot) string {
	return func(s *etcd.Snapshot) string {
		return etcd.AssessHealth(etcd.HealthInput{Snapshot: s, Now: time.Now(), Machines: machines(nodes)}).Cluster.Reason
	}
}

// TestBackend_memberControllerStopped stops K3s's member controller: the removal stays in
// progress and says it waits on K3s and for how long; once K3s runs again, the watch reports
// it removed.
func TestBackend_memberControllerStopped(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startCluster(t, "v1.34.2+k3s1", 3, clusterOptions{})
	node := c.follower(g)
	member, _ := c.sim.MemberName(node)
	c.sim.StopMemberController()

	short, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
	defer cancel()
	r, err := c.backend.WaitForRemoval(short, c.memberOf(node))
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(r.State).To(Equal(etcd.RemovalInProgress))
	t.Logf("with K3s's member controller stopped: %v", err)
	g.Expect(r.Reason).To(HavePrefix(`waiting on K3s to remove etcd member ` + member + `: etcd.k3s.cattle.io/remove=true was set `))
	// The wait says since when, and that age grows (not a wall-clock window: the machine may be
	// slow).
	first := requestAge(g, r.Reason)
	g.Eventually(func(g Gomega) {
		r, err := c.backend.RemoveMember(ctx, c.memberOf(node))
		g.Expect(err).ToNot(HaveOccurred())
		g.Expect(r.State).To(Equal(etcd.RemovalInProgress))
		g.Expect(requestAge(g, r.Reason)).To(BeNumerically(">", first))
	}, waitTimeout, pollInterval).Should(Succeed())
	g.Expect(c.hasMember(g, member)).To(BeTrue())
	// A restarted controller keeps waiting and does not request again.
	requestedAt := c.node(g, node).Annotations[k3s.RemovalRequestedAtAnnotation]
	restarted, err := k3s.New(k3s.Config{Client: c.client})
	g.Expect(err).ToNot(HaveOccurred())
	r, err = restarted.RemoveMember(ctx, c.memberOf(node))
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(r.State).To(Equal(etcd.RemovalInProgress))
	g.Expect(c.node(g, node).Annotations[k3s.RemovalRequestedAtAnnotation]).To(Equal(requestedAt))

	g.Expect(c.sim.StartMemberController(ctx)).To(Succeed())
	wait, cancel2 := context.WithTimeout(ctx, waitTimeout)
	defer cancel2()
	r, err = c.backend.WaitForRemoval(wait, c.memberOf(node))
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
	g.Expect(c.hasMember(g, member)).To(BeFalse())
}

// TestBackend_removeLeader removes the leader's member on each generation of K3s's member
// controller: K3s 1.34.2 / 1.32.10 and later move leadership first, older ones leave etcd to
// elect a new leader. Either way the member goes and the cluster keeps a leader.
func TestBackend_removeLeader(t *testing.T) {
	for _, version := range []string{"v1.27.10+k3s1", "v1.33.4+k3s1", "v1.34.2+k3s1", "v1.32.10+rke2r1"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			c := startCluster(t, version, 3, clusterOptions{})
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			leader := c.leaderNode(g)
			member, _ := c.sim.MemberName(leader)
			move, err := c.backend.MoveLeader(ctx, c.memberOf(leader), c.memberOf(c.follower(g)))
			g.Expect(err).ToNot(HaveOccurred())
			t.Logf("%s: MoveLeader: %s: %s", version, move.Outcome, move.Warning)

			r, err := c.backend.WaitForRemoval(ctx, c.memberOf(leader))
			g.Expect(err).ToNot(HaveOccurred())
			g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
			g.Expect(c.hasMember(g, member)).To(BeFalse())
			g.Eventually(func(g Gomega) { g.Expect(c.leaderNode(g)).ToNot(Equal(leader)) }, waitTimeout, pollInterval).Should(Succeed())
			v, _ := k3s.ParseVersion(version)
			if v.MovesLeader() {
				g.Expect(c.sim.LeaderMoves()).To(Equal(1), "K3s moved leadership before the removal")
			} else {
				g.Expect(c.sim.LeaderMoves()).To(BeZero())
			}
		})
	}
}

// TestBackend_removeMemberInputs checks what RemoveMember says about Nodes that host no member.
func TestBackend_removeMemberInputs(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startCluster(t, "v1.33.4+k3s1", 2, clusterOptions{})

	r, err := c.backend.RemoveMember(ctx, etcd.Member{Name: "no-such-node-00000000", NodeName: "no-such-node"})
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved), "a Node that is gone has no member: K3s's finalizer saw to that")
	g.Expect(r.Reason).To(ContainSubstring("finalizer"))

	worker := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}}
	g.Expect(c.client.Create(ctx, worker)).To(Succeed())
	_, err = c.backend.RemoveMember(ctx, etcd.Member{Name: "worker-0-00000000", NodeName: "worker-0"})
	g.Expect(err).To(MatchError(etcd.ErrInvalidInput))
	g.Expect(err.Error()).To(ContainSubstring("not an etcd Node"))
	g.Expect(c.node(g, "worker-0").Annotations).ToNot(HaveKey(c.keys.Remove))
}
