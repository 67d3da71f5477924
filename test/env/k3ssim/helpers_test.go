package k3ssim

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// clusterLabel scopes each simulated cluster to its own Nodes on the shared apiserver.
const clusterLabel = "k3ssim.test/cluster"

// Short intervals keep the suite fast; K3s's own are 15 s and 5 min.
const (
	testTick        = 250 * time.Millisecond
	testCallTimeout = 2 * time.Second
	waitTimeout     = 20 * time.Second
	pollInterval    = 50 * time.Millisecond
)

// k3sCluster is a simulated K3s cluster: real etcd members named `<node>-<8 hex>` on distinct
// loopback IPs, their Nodes on the shared workload apiserver, and the simulator.
type k3sCluster struct {
	etcd    *etcdcluster.Cluster
	sim     *Simulator
	client  client.Client
	profile Profile
	nodes   []string
	ips     map[string]string
	started time.Time
}

// startK3sCluster starts n servers of the given version, with Nodes named `<prefix>-<i>`.
func startK3sCluster(ctx context.Context, t *testing.T, version, prefix string, n int, tune ...func(*Options)) *k3sCluster {
	t.Helper()
	g := NewWithT(t)
	c := &k3sCluster{profile: MustParseProfile(version), ips: map[string]string{}, started: time.Now()}
	var specs []etcdcluster.MemberSpec
	for i := range n {
		node := fmt.Sprintf("%s-%d", prefix, i)
		name, err := newMemberName(node)
		g.Expect(err).ToNot(HaveOccurred())
		ip := fmt.Sprintf("127.0.0.%d", 10+i)
		specs = append(specs, etcdcluster.MemberSpec{NodeName: node, MemberName: name, IP: ip})
		c.nodes, c.ips[node] = append(c.nodes, node), ip
	}
	// Twice etcdcluster's default timeouts: a 2-core machine running many clusters at once
	// must not flap leaders, or "the leader" of a step is no longer the leader when K3s acts.
	cluster, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: specs, TickMs: 100, ElectionMs: 1000})
	g.Expect(err).ToNot(HaveOccurred())
	c.etcd = cluster
	t.Cleanup(func() { _ = cluster.Close() })

	c.client, err = client.New(workload.Config, client.Options{})
	g.Expect(err).ToNot(HaveOccurred())
	opts := Options{
		Version: version, RESTConfig: workload.Config, Etcd: cluster,
		Tick: testTick, CallTimeout: testCallTimeout,
		RequeueBaseDelay: 20 * time.Millisecond, RequeueMaxDelay: 300 * time.Millisecond,
		Logger:        testr.NewWithOptions(t, testr.Options{Verbosity: 1}),
		ClusterLabels: map[string]string{clusterLabel: prefix},
	}
	for _, f := range tune {
		f(&opts)
	}
	c.sim, err = New(opts)
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(c.sim.Start(ctx)).To(Succeed())
	t.Cleanup(func() { c.cleanup(t) })
	return c
}

// cleanup stops the simulator and deletes the test's Nodes, releasing the finalizer itself.
func (c *k3sCluster) cleanup(t *testing.T) {
	c.sim.Stop()
	ctx := context.Background()
	nodes := &corev1.NodeList{}
	if err := c.client.List(ctx, nodes, client.MatchingLabels(c.sim.opts.ClusterLabels)); err != nil {
		t.Logf("failed to list Nodes for cleanup: %v", err)
		return
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		_ = c.client.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch))
		_ = client.IgnoreNotFound(c.client.Delete(ctx, n))
	}
}

// node reads a Node.
func (c *k3sCluster) node(ctx context.Context, g Gomega, name string) *corev1.Node {
	n := &corev1.Node{}
	g.Expect(c.client.Get(ctx, client.ObjectKey{Name: name}, n)).To(Succeed())
	return n
}

// annotations returns a Node's annotations; a failed read fails g, so that an apiserver error
// never passes for a missing annotation.
func (c *k3sCluster) annotations(ctx context.Context, g Gomega, name string) map[string]string {
	return c.node(ctx, g, name).Annotations
}

// annotate sets one annotation, as an outside actor would.
func (c *k3sCluster) annotate(ctx context.Context, g Gomega, node, key, value string) {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	g.Expect(c.client.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
		client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// members lists the etcd members by name (etcd's committed list).
func (c *k3sCluster) members(ctx context.Context, g Gomega) map[string]member {
	list, err := c.etcd.MemberList(ctx)
	g.Expect(err).ToNot(HaveOccurred())
	out := map[string]member{}
	for _, m := range list {
		out[m.Name] = memberFromPB(m)
	}
	return out
}

// leaderNode returns the Node whose member is the raft leader. Members the simulator joined
// are named after their Node as K3s names them, so the Node is read from the member name.
func (c *k3sCluster) leaderNode(g Gomega) string {
	leader, err := c.etcd.Leader()
	g.Expect(err).ToNot(HaveOccurred())
	node := memberNamePattern.FindStringSubmatch(leader.Name())
	g.Expect(node).ToNot(BeNil(), "leader %s is not named as K3s names members", leader.Name())
	return node[1]
}

// voterCondition returns a Node's EtcdIsVoter condition, or nil.
func voterCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == EtcdIsVoterCondition {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// reason returns a Node's EtcdIsVoter reason, or "" when the condition is missing; a failed
// read fails g.
func (c *k3sCluster) reason(ctx context.Context, g Gomega, name string) string {
	if cond := voterCondition(c.node(ctx, g, name)); cond != nil {
		return cond.Reason
	}
	return ""
}

// readyStatus returns a Node's Ready condition status; a failed read fails g.
func (c *k3sCluster) readyStatus(ctx context.Context, g Gomega, name string) corev1.ConditionStatus {
	for _, cond := range c.node(ctx, g, name).Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}
	return ""
}

// waitReady waits until every server's Node carries its metadata and, where the version has
// EtcdIsVoter, MemberNotLearner; it returns how long the cluster took since it was started.
func (c *k3sCluster) waitReady(ctx context.Context, g Gomega) time.Duration {
	for _, node := range c.nodes {
		g.Eventually(func(g Gomega) {
			n := c.node(ctx, g, node)
			name, running := c.sim.MemberName(node)
			g.Expect(running).To(BeTrue())
			g.Expect(n.Annotations).To(HaveKeyWithValue(c.profile.Keys.NodeName, name))
			g.Expect(n.Finalizers).To(ContainElement(MemberControllerFinalizer))
			if c.profile.HasEtcdIsVoter {
				cond := voterCondition(n)
				g.Expect(cond).ToNot(BeNil())
				g.Expect(cond.Reason).To(Equal(ReasonMemberNotLearner))
			}
		}, waitTimeout, pollInterval).Should(Succeed())
	}
	return time.Since(c.started)
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// nodePrefix turns a test label and version into a Node name prefix.
func nodePrefix(label, version string) string {
	return label + "-" + strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(version), "-"), "-")
}

// follower returns a Node whose member does not lead.
func (c *k3sCluster) follower(ctx context.Context, g Gomega) string {
	followers := c.followers(ctx, g)
	g.Expect(followers).NotTo(BeEmpty(), "no follower")
	return followers[0]
}

// followers returns the Nodes whose members do not lead, in the order of c.nodes.
func (c *k3sCluster) followers(ctx context.Context, g Gomega) []string {
	leader := c.leaderNode(g)
	var out []string
	for _, n := range c.nodes {
		if n != leader {
			out = append(out, n)
		}
	}
	return out
}

// moveLeader moves etcd leadership to the member on node, through the current leader.
func (c *k3sCluster) moveLeader(ctx context.Context, g Gomega, node string) {
	g.Eventually(func(g Gomega) {
		leader := c.leaderNode(g)
		if leader == node {
			return
		}
		cli, err := c.etcd.MemberOnNode(leader).NewClient(ctx)
		g.Expect(err).ToNot(HaveOccurred())
		defer func() { _ = cli.Close() }()
		_, err = cli.MoveLeader(ctx, c.etcd.MemberOnNode(node).ID())
		g.Expect(err).ToNot(HaveOccurred())
		g.Expect(c.leaderNode(g)).To(Equal(node))
	}, waitTimeout, pollInterval).Should(Succeed())
}
