package k3s_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/etcdtest"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

// TestConformance runs the etcd.Cluster conformance suite on this backend against the K3s
// simulator, once per K3s version profile. Cases the backend cannot run are declared not
// applicable with the reason, per profile.
func TestConformance(t *testing.T) {
	for _, version := range profiles {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			etcdtest.Run(t, &harness{version: version})
		})
	}
}

// harness starts simulated K3s clusters of one version for the conformance suite.
type harness struct{ version string }

var _ etcdtest.Harness = &harness{}

// Start starts a cluster on its own workload apiserver (every K3s cluster is isolated: the
// backend reads all etcd Nodes of its apiserver).
func (h *harness) Start(t *testing.T, spec etcdtest.Spec) *etcdtest.Env {
	c := startCluster(t, h.version, spec.Members, clusterOptions{})
	return &etcdtest.Env{Cluster: c.backend, Nodes: append([]string(nil), c.nodes...), Faults: &faults{c: c}}
}

// Reasons a case does not apply, shared by the profiles.
const (
	naGhost = "needs a member that never started to be visible; K3s reports members only through the Nodes that host them, " +
		"and such a member has none (a ghost): the backend declares the GhostMembers blind spot instead (k3s issue 11231)"
	naClusterID = "needs each member's cluster ID; K3s puts none on Nodes, and the backend declares the ClusterIDAgreement blind spot"
	naLeader    = "needs the leader; K3s does not publish which member leads (Leader blind spot). K3s 1.34.2 / 1.32.10+ moves " +
		"leadership itself during removal, older K3s removes the leader and etcd elects another: see TestBackend_removeLeader"
	naCA = "the backend uses no etcd CA: it reads and writes Node objects only"
)

// NotApplicable names the cases this backend cannot run on this version.
func (h *harness) NotApplicable() map[etcdtest.Case]string {
	na := map[etcdtest.Case]string{
		etcdtest.NeverStarted: naGhost,
		etcdtest.SplitBrain:   naClusterID,
		etcdtest.RemoveLeader: naLeader,
		etcdtest.WrongCA:      naCA,
		etcdtest.MissingCA:    naCA,
	}
	v, _ := k3s.ParseVersion(h.version)
	var noHealth string
	switch {
	case !v.HasEtcdIsVoter():
		noHealth = fmt.Sprintf("K3s %s writes no EtcdIsVoter condition, so the backend reports every member's health Unknown (never healthy); the case needs a healthy cluster", v)
	case !v.HasHealthReasons():
		noHealth = fmt.Sprintf("K3s %s writes EtcdIsVoter without a health check, so the backend reports every member's health Unknown (never healthy); the case needs a healthy cluster", v)
	}
	if !v.ExactMemberMatch() {
		na[etcdtest.Learner] = fmt.Sprintf("the suite names the learner's Node <node>-learner; K3s %s matches members to Nodes by the prefix "+
			"<node>-, so its EtcdIsVoter condition on <node> may be about the learner (fixed in K3s 1.29.3), and the backend reports "+
			"that Node's member Unknown instead of healthy (Test_assessNodes)", v)
	}
	if noHealth != "" {
		for _, c := range []etcdtest.Case{etcdtest.Healthy1, etcdtest.Healthy3, etcdtest.Healthy5, etcdtest.MemberKilled,
			etcdtest.MemberRestarted, etcdtest.NoSpaceAlarm, etcdtest.Learner, etcdtest.RemoveLosesQuorum, etcdtest.APIServerDown} {
			na[c] = noHealth
		}
	}
	return na
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
	return f.c.etcd.Member(name).Kill()
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
	if _, err := f.c.sim.JoinServer(ctx, node, ip); err != nil {
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
