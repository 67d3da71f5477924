package k3sbackend_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/etcdtest"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

// conformant are the K3s versions the backend is conformant on: those whose EtcdIsVoter
// condition carries member health (1.29.1 / 1.28.6 / 1.27.10 / 1.26.13 and later). Older K3s
// publishes no health on Nodes at all, so the backend reports every member Unknown there and
// the suite's healthy cases cannot pass: TestBackend_withoutHealth covers those versions.
var conformant = []string{"v1.27.10+k3s1", "v1.33.4+k3s1", "v1.34.2+k3s1", "v1.32.10+rke2r1"}

// TestConformance runs the etcd.Cluster conformance suite on this backend against the K3s
// simulator, once per conformant K3s version profile.
func TestConformance(t *testing.T) {
	for _, version := range conformant {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			etcdtest.Run(t, &harness{version: version})
		})
	}
}

// harness starts simulated K3s clusters of one version for the conformance suite.
type harness struct{ version string }

var _ etcdtest.Harness = &harness{}

// conformanceHeartbeat is the simulated K3s's re-write period of an unchanged EtcdIsVoter
// condition in the suite (K3s: 5 min), so that HideMember's stale heartbeat shows in seconds.
const conformanceHeartbeat = 3 * time.Second

// Start starts a cluster on its own workload apiserver (every K3s cluster is isolated: the
// backend reads all etcd Nodes of its apiserver).
func (h *harness) Start(t *testing.T, spec etcdtest.Spec) *etcdtest.Env {
	c := startCluster(t, h.version, spec.Members, clusterOptions{heartbeat: conformanceHeartbeat})
	return &etcdtest.Env{Cluster: c.backend, Nodes: append([]string(nil), c.nodes...), Faults: &faults{c: c}}
}

// Reasons a case does not apply.
const (
	naGhost = "needs a member that never started to be visible and removable by ID; K3s reports members only through the Nodes that " +
		"host them and removes them only through a Node's annotations, and such a member has no Node (a ghost): the backend declares " +
		"the GhostMembers blind spot instead (k3s issue 11231). K3s's own leader removes a learner that makes no progress for 5 minutes"
	naClusterID = "needs each member's cluster ID; K3s puts none on Nodes, and the backend declares the ClusterIDAgreement blind spot"
	naCA        = "the backend uses no etcd CA: it reads and writes Node objects only"
)

// NotApplicable names the cases this backend cannot run; none of them is required.
func (h *harness) NotApplicable() map[etcdtest.Case]string {
	return map[etcdtest.Case]string{
		etcdtest.NeverStarted: naGhost,
		etcdtest.SplitBrain:   naClusterID,
		etcdtest.WrongCA:      naCA,
		etcdtest.MissingCA:    naCA,
	}
}

// faults are the suite's fault handles on a simulated K3s cluster.
type faults struct{ c *k3sCluster }

var _ etcdtest.Faults = &faults{}

// errNotApplicable is returned by handles of faults the K3s environment has no use for.
var errNotApplicable = errors.New("not applicable to the K3s backend")

func (f *faults) member(node string) (string, error) {
	name, _ := f.c.sim.MemberName(node)
	if name == "" || f.c.etcd.Member(name) == nil {
		return "", fmt.Errorf("no etcd member on Node %s", node)
	}
	return name, nil
}

func (f *faults) KillMember(_ context.Context, node string) error {
	name, err := f.member(node)
	if err != nil {
		return err
	}
	return f.c.sim.Quiesced(f.c.etcd.Member(name).Kill)
}

func (f *faults) RestartMember(ctx context.Context, node string) error {
	name, err := f.member(node)
	if err != nil {
		return err
	}
	return f.c.etcd.Member(name).Restart(ctx)
}

func (f *faults) RaiseNoSpace(ctx context.Context, node string) error {
	name, err := f.member(node)
	if err != nil {
		return err
	}
	return f.c.etcd.RaiseNoSpace(ctx, name)
}

// AddLearner joins a new K3s server on node and holds the leader's learner promotion, so it
// stays a learner.
func (f *faults) AddLearner(ctx context.Context, node string) error {
	f.c.sim.HoldPromotion()
	ip := fmt.Sprintf("127.0.0.%d", 10+len(f.c.ips))
	// An etcd-only server: on a server that runs an apiserver, K3s writes node-name only once
	// the learner is promoted, so a held learner would never show on Nodes.
	if _, err := f.c.sim.JoinEtcdOnlyServer(ctx, node, ip); err != nil {
		return err
	}
	f.c.ips[node] = ip
	return nil
}

func (f *faults) AddNeverStarted(context.Context) (uint64, error) { return 0, errNotApplicable }
func (f *faults) SplitBrain(context.Context, string) error        { return errNotApplicable }
func (f *faults) BreakCA(context.Context) error                   { return errNotApplicable }
func (f *faults) DeleteCA(context.Context) error                  { return errNotApplicable }

func (f *faults) StopAPIServer(context.Context) error { return f.c.api.StopServing() }

func (f *faults) LeaderNode(ctx context.Context) (string, error) {
	return f.c.leaderNodeErr(ctx)
}

func (f *faults) HasMember(ctx context.Context, node string) (bool, error) {
	name, _ := f.c.sim.MemberName(node)
	if name == "" {
		return false, nil
	}
	return f.c.hasMemberErr(ctx, name)
}

// AddDuplicateName registers a second etcd Node, dup-<node>, whose node-name and node-address
// annotations name node's member, as a copied or hand-edited Node would. K3s's metadata
// controller writes those only on a server's own Node; its leader's condition pass then
// matches the member to both Nodes.
func (f *faults) AddDuplicateName(ctx context.Context, node string) error {
	name, err := f.member(node)
	if err != nil {
		return err
	}
	keys := f.c.keys
	dup := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dup-" + node,
		Labels:      map[string]string{k3s.EtcdRoleLabel: "true"},
		Annotations: map[string]string{keys.NodeName: name, keys.NodeAddress: f.c.ips[node]},
	}}
	if err := f.c.client.Create(ctx, dup); err != nil {
		return fmt.Errorf("failed to create Node %s: %w", dup.Name, err)
	}
	// A patch, not an update: K3s's member controller adds its finalizer meanwhile.
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"status":{"nodeInfo":{"kubeletVersion":%q}}}`, f.c.version)))
	if err := f.c.client.Status().Patch(ctx, dup, patch); err != nil {
		return fmt.Errorf("failed to write Node %s status: %w", dup.Name, err)
	}
	return nil
}

// HideMember makes the etcd leader's K3s stop refreshing EtcdIsVoter on node, so its heartbeat
// goes stale while the member runs.
func (f *faults) HideMember(_ context.Context, node string) error {
	f.c.sim.StopConditionWriterFor(node)
	return nil
}

// HasMemberID maps the backend's synthetic ID (k3s.MemberID of the member name) to etcd's
// member list.
func (f *faults) HasMemberID(ctx context.Context, id uint64) (bool, error) {
	members, err := f.c.etcdMembers(ctx)
	if err != nil {
		return false, err
	}
	for _, m := range members {
		if k3s.MemberID(m.Name) == id {
			return true, nil
		}
	}
	return false, nil
}

func (f *faults) MemberCount(ctx context.Context) (int, error) {
	members, err := f.c.etcdMembers(ctx)
	return len(members), err
}
