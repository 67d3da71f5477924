package etcdtest

import (
	"context"
	"testing"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Harness starts workload clusters for the backend under test. Implementations live in the
// backend's own test package (pkg/kubeadm, pkg/k3s) and use test/env.
type Harness interface {
	// Start starts a fresh workload cluster whose etcd has spec.Members healthy voting members,
	// one per Node, each Node hosting exactly one member, and returns the backend under test
	// connected to it. Everything it starts is stopped through t.Cleanup. It fails t (t.Fatal)
	// when the cluster cannot be started.
	Start(t *testing.T, spec Spec) *Env

	// NotApplicable names the cases this backend cannot run, with the reason (for example "K3s
	// keeps no etcd CA Secret"). Those cases are reported, not run, and never count as passed.
	NotApplicable() map[Case]string
}

// Spec describes the workload cluster a case needs.
type Spec struct {
	// Members is the number of voting members, 1 to 5.
	Members int
	// Isolated asks for infrastructure no other cluster shares (its own workload apiserver):
	// the case breaks it (for example stops the apiserver).
	Isolated bool
}

// Env is one started workload cluster with the backend under test.
type Env struct {
	// Cluster is the backend under test, connected to this workload cluster.
	Cluster etcd.Cluster
	// Nodes are the Nodes hosting the members, in start order. Each is also the name of the
	// control-plane Machine the suite assumes on it.
	Nodes []string
	// Faults breaks the cluster and tells the ground truth, bypassing the backend.
	Faults Faults
	// EtcdVersion is the etcd version the members run (e.g. "3.5.35"), as etcd reports it; empty
	// means v3.6 or later. The Status figures a backend can pass on depend on it.
	EtcdVersion string

	// healthy is the last healthy snapshot a case saw, for a later case of the same group that
	// must name members after it broke the backend's access.
	healthy *etcd.Snapshot
}

// Faults are the fault handles and ground-truth probes a case uses. Every method acts on the
// real environment directly, not through the backend under test. A handle that the backend's
// environment cannot provide may return an error, as long as the cases that need it are
// declared NotApplicable.
type Faults interface {
	// KillMember stops the member on node abruptly; its data is kept.
	KillMember(ctx context.Context, node string) error
	// RestartMember starts the member on node again after KillMember, and returns once it
	// serves clients.
	RestartMember(ctx context.Context, node string) error
	// RaiseNoSpace raises a NOSPACE alarm for the member on node.
	RaiseNoSpace(ctx context.Context, node string) error
	// AddLearner adds a new Node named node whose member joins as a learner, starts and is not
	// promoted.
	AddLearner(ctx context.Context, node string) error
	// AddNeverStarted adds a member that never starts (a failed join) and returns its ID.
	AddNeverStarted(ctx context.Context) (uint64, error)
	// SplitBrain makes node's etcd answer from a separate single-member cluster with its own
	// cluster ID.
	SplitBrain(ctx context.Context, node string) error
	// BreakCA replaces the etcd CA the backend reads (the `<cluster>-etcd` Secret) with an
	// unrelated CA.
	BreakCA(ctx context.Context) error
	// DeleteCA deletes the etcd CA Secret.
	DeleteCA(ctx context.Context) error
	// StopAPIServer makes the workload apiserver unreachable.
	StopAPIServer(ctx context.Context) error
	// AddDuplicateName makes a second member carry the name of the member on node, the way a
	// reused hostname does: kubeadm: a member that was never removed, with node's name and
	// another peer URL, and that does not run; K3s: a second etcd Node whose node-name
	// annotation names node's member. The member on node keeps running.
	AddDuplicateName(ctx context.Context, node string) error
	// HideMember makes the health of the member on node unknowable to the backend without
	// making the member itself unhealthy: kubeadm: node's etcd Pod is gone from the workload
	// apiserver, so the member cannot be asked; K3s: the leader's K3s stops refreshing
	// EtcdIsVoter on node, so the heartbeat goes stale.
	HideMember(ctx context.Context, node string) error

	// LeaderNode returns the Node whose member leads, as etcd itself says (ground truth).
	LeaderNode(ctx context.Context) (string, error)
	// HasMember reports whether the member hosted on node is in the member list, as etcd
	// itself says (ground truth).
	HasMember(ctx context.Context, node string) (bool, error)
	// HasMemberID reports whether the member the backend calls id is in the member list, as
	// etcd itself says (ground truth; a backend with synthetic IDs maps them to etcd's).
	HasMemberID(ctx context.Context, id uint64) (bool, error)
	// MemberCount is the number of members in the member list, learners and never-started
	// members included, as etcd itself says (ground truth).
	MemberCount(ctx context.Context) (int, error)
}

// Case names one conformance case.
type Case string

// The conformance cases.
const (
	// Healthy1 observes a healthy 1-member cluster and checks that its last member is never removed.
	Healthy1 Case = "Healthy1Member"
	// Healthy3 observes a healthy 3-member cluster; MoveLeader off a follower is a no-op.
	Healthy3 Case = "Healthy3Members"
	// Healthy5 observes a healthy 5-member cluster.
	Healthy5 Case = "Healthy5Members"
	// MemberKilled: a killed member is NotHealthy because it is not answering.
	MemberKilled Case = "MemberKilled"
	// MemberRestarted: a killed then restarted member is healthy again.
	MemberRestarted Case = "MemberRestarted"
	// UnknownNotRemovable: a member whose health cannot be learned is not healthy, and a caller
	// that removes what the quorum projection allows removes no other member because of it.
	UnknownNotRemovable Case = "UnknownHealthNotRemovable"
	// NoSpaceAlarm: a member with a NOSPACE alarm is not healthy; a backend that sees alarms names it.
	NoSpaceAlarm Case = "NoSpaceAlarm"
	// Learner: a learner is reported as such, answers, and counts as a voter to be.
	Learner Case = "Learner"
	// NeverStarted: a member that never started makes the cluster NotHealthy and is removed, by
	// its ID, through another member.
	NeverStarted Case = "NeverStartedMember"
	// DuplicateName: two members with one name are a problem on the cluster and the Machine, and
	// removing the one that does not run never removes the one that does.
	DuplicateName Case = "DuplicateMemberName"
	// SplitBrain: one Node answering from another cluster makes the cluster NotHealthy (split brain).
	SplitBrain Case = "SplitBrain"
	// RemoveLeader: leadership moves to the first candidate, then the old leader is removed.
	RemoveLeader Case = "RemoveLeader"
	// RemoveRemoved: removing an already removed member reports Removed again.
	RemoveRemoved Case = "RemoveAlreadyRemoved"
	// RemoveLeaderDirectly: the leader is removed with no leadership move first; the backend
	// reports the outcome etcd committed, never a refusal it cannot know is final.
	RemoveLeaderDirectly Case = "RemoveLeaderDirectly"
	// TransientDuringRemoval: the leader is killed while a removal runs; the backend never
	// reports Rejected or a Removed that etcd does not confirm, and the removal completes once the
	// leader is back.
	TransientDuringRemoval Case = "TransientErrorDuringRemoval"
	// RemoveLosesQuorum: a caller that removes whatever the quorum projection allows does not
	// remove a member whose removal would lose quorum.
	RemoveLosesQuorum Case = "RemoveWouldLoseQuorum"
	// WrongCA: an unrelated CA gives a clear error or per-member TLS failures, and no removal.
	WrongCA Case = "WrongCA"
	// MissingCA: a missing CA Secret gives an ErrInvalidInput naming the Secret, and no removal.
	MissingCA Case = "MissingCASecret"
	// APIServerDown: an unreachable workload apiserver gives ErrUnreachable (ConnectionDown) and
	// no action.
	APIServerDown Case = "APIServerDown"
)

// Cases returns every case, in the order Run runs them.
func Cases() []Case {
	var out []Case
	for _, g := range groups {
		out = append(out, g.cases...)
	}
	return out
}

// Required returns the cases no backend may declare not applicable: without them "passes the
// conformance suite" would say nothing about what a provider relies on.
func Required() []Case {
	return []Case{Healthy1, Healthy3, Healthy5, MemberKilled, UnknownNotRemovable, RemoveLosesQuorum,
		RemoveLeader, RemoveRemoved, RemoveLeaderDirectly, TransientDuringRemoval, DuplicateName, APIServerDown}
}
