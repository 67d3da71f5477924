package k3sbackend_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/k3ssim"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// Short intervals keep the suite fast; K3s's own are 15 s and 5 min.
const (
	testTick      = 200 * time.Millisecond
	testHeartbeat = 20 * time.Second
	waitTimeout   = 30 * time.Second
	pollInterval  = 50 * time.Millisecond
)

// profiles is every K3s version profile of the simulator: before EtcdIsVoter (legacy
// removal), legacy removal with EtcdIsVoter and health, EtcdIsVoter without health, the
// 1.28.3 – 1.34.1 generation (rejection clears remove, requeue-forever bug), the leader-aware
// generation, and its 1.32 backport on RKE2 keys.
var profiles = []string{
	"v1.26.5+k3s1",
	"v1.27.10+k3s1",
	"v1.28.4+k3s1",
	"v1.33.4+k3s1",
	"v1.34.2+k3s1",
	"v1.32.10+rke2r1",
}

// defaultParallel is how many tests run at once unless -test.parallel is given. The tests
// mostly wait (apiserver start, etcd's 5 s strict reconfiguration window, K3s ticks), not on
// the CPU, so GOMAXPROCS (the default) would leave the machine idle; each test runs its own
// kube-apiserver and etcd, so not more.
const defaultParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	env.DefaultTestParallel(defaultParallel)
	ctrl.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// clusterOptions tune one simulated cluster.
type clusterOptions struct {
	// simTransport, when set, wraps the simulator's transport to the apiserver.
	simTransport func(http.RoundTripper) http.RoundTripper
	heartbeat    time.Duration
	noStrict     bool
	backendTune  func(*k3s.Config)
	simTune      func(*k3ssim.Options)
}

// k3sCluster is one simulated K3s cluster on its own workload apiserver: real etcd members
// named `<node>-<8 hex>` on distinct loopback IPs, the simulator, and the backend under test.
type k3sCluster struct {
	api     *env.APIServer
	etcd    *etcdcluster.Cluster
	sim     *k3ssim.Simulator
	backend *k3s.Backend
	client  client.Client
	keys    k3s.Keys
	version string
	nodes   []string
	ips     map[string]string
}

// startCluster starts n K3s servers of version with Nodes cp-0 ... cp-<n-1> on their own
// workload apiserver (workload.StartK3s, without kubelet stand-ins: the simulator writes each
// Node's Ready condition), and the backend.
func startCluster(t testing.TB, version string, n int, o clusterOptions) *k3sCluster {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	if o.heartbeat == 0 {
		o.heartbeat = testHeartbeat
	}
	w, err := workload.StartK3s(ctx, workload.K3sOptions{
		Version: version, Members: n, Tick: testTick, HeartbeatInterval: o.heartbeat,
		NoKubelets: true, DisableStrictReconfigCheck: o.noStrict,
		Simulator: func(so *k3ssim.Options) {
			so.CallTimeout, so.RequeueBaseDelay, so.RequeueMaxDelay = time.Second, 20*time.Millisecond, 300*time.Millisecond
			if o.simTransport != nil {
				so.RESTConfig = rest.CopyConfig(so.RESTConfig)
				so.RESTConfig.Wrap(o.simTransport)
			}
			if o.simTune != nil {
				o.simTune(so)
			}
		},
	})
	g.Expect(err).ToNot(HaveOccurred())
	t.Cleanup(func() { _ = w.Close() })
	c := &k3sCluster{
		api: w.APIServer, client: w.APIServer.Client, etcd: w.Etcd, sim: w.Simulator,
		version: version, nodes: slices.Clone(w.Nodes), ips: map[string]string{},
	}
	for _, m := range w.Etcd.Members() {
		c.ips[m.NodeName()] = m.IP()
	}
	v, err := k3s.ParseVersion(version)
	g.Expect(err).ToNot(HaveOccurred())
	c.keys = k3s.KeysFor(v.Program)
	cfg := k3s.Config{HeartbeatInterval: o.heartbeat, Tick: testTick, ClockSkew: time.Second}
	if o.backendTune != nil {
		o.backendTune(&cfg)
	}
	c.backend, err = k3s.Start(ctx, w.APIServer.Config, cfg)
	g.Expect(err).ToNot(HaveOccurred())
	t.Cleanup(c.backend.Stop)
	c.waitReady(g)
	return c
}

// waitReady waits until every Node carries its member name and, where the version writes it,
// an EtcdIsVoter condition.
func (c *k3sCluster) waitReady(g Gomega) {
	v, _ := k3s.ParseVersion(c.version)
	for _, node := range c.nodes {
		g.Eventually(func(g Gomega) {
			n := c.node(g, node)
			name, running := c.sim.MemberName(node)
			g.Expect(running).To(BeTrue())
			g.Expect(n.Annotations).To(HaveKeyWithValue(c.keys.NodeName, name))
			if v.HasEtcdIsVoter() {
				g.Expect(hasCondition(n, k3s.EtcdIsVoterCondition, k3s.ReasonMemberNotLearner)).To(BeTrue())
			}
		}, waitTimeout, pollInterval).Should(Succeed())
	}
}

// memberOf is the member the simulator runs on node (or ran last), named as a snapshot names it.
func (c *k3sCluster) memberOf(node string) etcd.Member {
	name, _ := c.sim.MemberName(node)
	return etcd.Member{ID: k3s.MemberID(name), Name: name, NodeName: node}
}

// node reads a Node from the apiserver.
func (c *k3sCluster) node(g Gomega, name string) *corev1.Node {
	n := &corev1.Node{}
	g.Expect(c.client.Get(context.Background(), client.ObjectKey{Name: name}, n)).To(Succeed())
	return n
}

func hasCondition(n *corev1.Node, t corev1.NodeConditionType, reason string) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == t && c.Reason == reason {
			return true
		}
	}
	return false
}

// hasMember reports whether etcd itself lists a member named name (ground truth).
func (c *k3sCluster) hasMember(g Gomega, name string) bool {
	ok, err := c.hasMemberErr(context.Background(), name)
	g.Expect(err).ToNot(HaveOccurred())
	return ok
}

func (c *k3sCluster) hasMemberErr(ctx context.Context, name string) (bool, error) {
	members, err := c.etcdMembers(ctx)
	if err != nil {
		return false, err
	}
	for _, m := range members {
		if m.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// etcdMembers is etcd's own member list (ground truth).
func (c *k3sCluster) etcdMembers(ctx context.Context) ([]*etcdserverpb.Member, error) {
	return c.etcd.MemberList(ctx)
}

// leaderNode returns the Node whose member leads, as etcd says (ground truth).
func (c *k3sCluster) leaderNode(g Gomega) string {
	node, err := c.leaderNodeErr(context.Background())
	g.Expect(err).ToNot(HaveOccurred())
	return node
}

// leaderNodeErr is leaderNode as an error: the Node the simulator runs the leading member on.
func (c *k3sCluster) leaderNodeErr(context.Context) (string, error) {
	leader, err := c.etcd.Leader()
	if err != nil {
		return "", err
	}
	for node := range c.ips {
		if name, _ := c.sim.MemberName(node); name == leader.Name() {
			return node, nil
		}
	}
	return "", fmt.Errorf("leader %s runs on no Node of the simulator", leader.Name())
}

// follower returns a Node whose member does not lead.
func (c *k3sCluster) follower(g Gomega) string {
	leader := c.leaderNode(g)
	for _, n := range c.nodes {
		if n != leader {
			return n
		}
	}
	return ""
}

// addUnstartedVoter adds a voting member whose peer URL nobody listens on, as a failed join
// leaves behind: it has no name and no Node. etcd refuses the change until the cluster has been
// healthy for 5 s (strict reconfiguration check), so it retries until ctx ends.
func (c *k3sCluster) addUnstartedVoter(ctx context.Context, g Gomega) {
	cli, err := c.etcd.NewClient(ctx)
	g.Expect(err).ToNot(HaveOccurred())
	defer func() { _ = cli.Close() }()
	g.Eventually(func() error {
		_, err := cli.MemberAdd(ctx, []string{"https://127.0.0.99:2380"})
		return err
	}, waitTimeout, 500*time.Millisecond).Should(Succeed())
}
