package etcdtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega" //nolint:revive // gomega's DSL reads best dot-imported, as in every test of the project

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Timing of the suite's waits. Faults take effect within a few election timeouts of the test
// clusters (500 ms); the bound is generous for a busy 2-core machine.
const (
	caseTimeout  = 90 * time.Second
	eventually   = 30 * time.Second
	pollInterval = 250 * time.Millisecond
)

// caseContext bounds one case.
func caseContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout) // t.Context needs Go 1.24; this module supports 1.23
	t.Cleanup(cancel)
	return ctx
}

// machines are the control-plane Machines the suite assumes: one per Node, named after it.
func machines(nodes ...string) []etcd.Machine {
	out := make([]etcd.Machine, 0, len(nodes))
	for i, n := range nodes {
		out = append(out, etcd.Machine{Name: n, NodeName: n, HealthCheckSucceeded: true, UpToDate: true,
			Created: time.Unix(int64(i), 0)})
	}
	return out
}

// observe observes once and fails g when Observe fails.
func observe(ctx context.Context, g Gomega, c etcd.Cluster) *etcd.Snapshot {
	snap, err := c.Observe(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "Observe")
	g.Expect(snap).NotTo(BeNil(), "Observe returned no snapshot and no error")
	return snap
}

// assess observes and computes the health verdict for the Machines on nodes.
func assess(ctx context.Context, g Gomega, c etcd.Cluster, nodes ...string) (*etcd.Snapshot, etcd.HealthVerdict) {
	snap := observe(ctx, g, c)
	return snap, etcd.AssessHealth(etcd.HealthInput{Snapshot: snap, Machines: machines(nodes...), Now: time.Now()})
}

// expectHealthy asserts that every Machine and the cluster are healthy and that every member
// on nodes answered.
func expectHealthy(g Gomega, snap *etcd.Snapshot, v etcd.HealthVerdict, nodes []string) {
	g.Expect(v.Cluster.Status).To(Equal(metav1.ConditionTrue), "EtcdClusterHealthy: %s", v.Cluster.Message)
	for _, n := range nodes {
		g.Expect(v.Machines[n].Status).To(Equal(metav1.ConditionTrue), "EtcdMemberHealthy of Machine %s: %s", n, v.Machines[n].Message)
		m, ok := snap.MemberByNode(n)
		g.Expect(ok).To(BeTrue(), "no member on Node %s in %v", n, snap.Members)
		ev, ok := snap.EvidenceFor(m.ID)
		g.Expect(ok).To(BeTrue(), "no evidence for member on Node %s", n)
		g.Expect(ev.Contact).To(Equal(etcd.ContactAnswered), "member on Node %s: %s", n, ev.Error)
	}
}

// eventuallyHealthy waits until the cluster on nodes is healthy.
func eventuallyHealthy(ctx context.Context, t *testing.T, c etcd.Cluster, nodes []string) *etcd.Snapshot {
	t.Helper()
	var snap *etcd.Snapshot
	NewWithT(t).Eventually(func(g Gomega) {
		s, v := assess(ctx, g, c, nodes...)
		expectHealthy(g, s, v, nodes)
		snap = s
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
	return snap
}

// leaderNode returns the Node of the leader the snapshot names.
func leaderNode(g Gomega, snap *etcd.Snapshot) string {
	g.Expect(snap.LeaderID).NotTo(BeZero(), "snapshot names no leader")
	m, ok := snap.MemberByID(snap.LeaderID)
	g.Expect(ok).To(BeTrue(), "leader %x is not in the member list", snap.LeaderID)
	g.Expect(m.NodeName).NotTo(BeEmpty(), "leader %s is on no Node", m)
	return m.NodeName
}

// memberOn returns the one member the snapshot puts on node, failing g when there is none or
// more than one.
func memberOn(g Gomega, snap *etcd.Snapshot, node string) etcd.Member {
	on := snap.MembersOnNode(node)
	g.Expect(on).To(HaveLen(1), "want exactly one member on Node %s in %v", node, snap.Members)
	return on[0]
}

// removeUntilDone calls RemoveMember as a controller does, on every pass until it reports
// Removed or Rejected, and returns the final result.
func removeUntilDone(ctx context.Context, t *testing.T, c etcd.Cluster, m etcd.Member) etcd.Removal {
	t.Helper()
	var last etcd.Removal
	NewWithT(t).Eventually(func(g Gomega) {
		r, err := c.RemoveMember(ctx, m)
		g.Expect(err).NotTo(HaveOccurred(), "RemoveMember(%s)", m)
		last = r
		g.Expect(r.State).To(BeElementOf(etcd.RemovalRemoved, etcd.RemovalRejected), "RemoveMember(%s): %s", m, r.Reason)
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(500 * time.Millisecond).Should(Succeed())
	return last
}

// removeConfirmed calls RemoveMember as a controller does until it reports Removed or Rejected,
// and checks every answer against etcd's own member list: Removed only when etcd has no such
// member, and never Rejected.
func removeConfirmed(ctx context.Context, t *testing.T, env *Env, m etcd.Member) etcd.Removal {
	t.Helper()
	var last etcd.Removal
	NewWithT(t).Eventually(func(g Gomega) {
		r, err := env.Cluster.RemoveMember(ctx, m)
		g.Expect(err).NotTo(HaveOccurred(), "RemoveMember(%s)", m)
		last = r
		g.Expect(r.State).NotTo(Equal(etcd.RemovalRejected), "RemoveMember(%s): %s", m, r.Reason)
		g.Expect(r.State).To(Equal(etcd.RemovalRemoved), "RemoveMember(%s): %s", m, r.Reason)
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(500 * time.Millisecond).Should(Succeed())
	g := NewWithT(t)
	g.Expect(hasMemberID(ctx, g, env, m.ID)).To(BeFalse(), "RemoveMember said Removed but etcd still has %s", m)
	return last
}

// removeIfAllowed is a caller as a controller is: it observes, asks the quorum projection about
// the member on node, and removes it only when the projection allows. It reports the verdict and
// whether it asked the backend to remove.
func removeIfAllowed(ctx context.Context, g Gomega, c etcd.Cluster, node string) (etcd.QuorumVerdict, bool) {
	snap := observe(ctx, g, c)
	m := memberOn(g, snap, node)
	v := etcd.CanRemoveMember(snap, time.Now(), m)
	if !v.Allowed {
		return v, false
	}
	_, err := c.RemoveMember(ctx, m)
	g.Expect(err).NotTo(HaveOccurred(), "RemoveMember(%s)", m)
	return v, true
}

// evidenceThrough returns the evidence gathered through node.
func evidenceThrough(snap *etcd.Snapshot, node string) (etcd.MemberEvidence, bool) {
	for _, ev := range snap.Evidence {
		if ev.NodeName == node {
			return ev, true
		}
	}
	return etcd.MemberEvidence{}, false
}

// hasMemberID asks the ground truth whether the member with id is still in the cluster.
func hasMemberID(ctx context.Context, g Gomega, env *Env, id uint64) bool {
	ok, err := env.Faults.HasMemberID(ctx, id)
	g.Expect(err).NotTo(HaveOccurred(), "ground truth for member %x", id)
	return ok
}

// memberCount asks the ground truth how many members the cluster has.
func memberCount(ctx context.Context, g Gomega, env *Env) int {
	n, err := env.Faults.MemberCount(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "ground truth member count")
	return n
}

// hasMember asks the ground truth whether node's member is still in the cluster.
func hasMember(ctx context.Context, g Gomega, env *Env, node string) bool {
	ok, err := env.Faults.HasMember(ctx, node)
	g.Expect(err).NotTo(HaveOccurred(), "ground truth for Node %s", node)
	return ok
}

// others returns nodes without the excluded ones.
func others(nodes []string, exclude ...string) []string {
	var out []string
	for _, n := range nodes {
		skip := false
		for _, x := range exclude {
			skip = skip || n == x
		}
		if !skip {
			out = append(out, n)
		}
	}
	return out
}

// reportsQuota says whether etcd of version (e.g. "3.5.35"; empty means v3.6 or later) reports
// its backend quota in StatusResponse: v3.6 and later do.
func reportsQuota(version string) bool {
	if version == "" {
		return true
	}
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		return true
	}
	return major > 3 || (major == 3 && minor >= 6)
}
