package etcd

import "context"

// Cluster is the etcd of one workload cluster, as a control-plane provider sees it. Backends
// implement it; controllers and providers consume it.
//
// Mutating calls name members as a Snapshot gave them, never by a Node name: a reused hostname
// can leave two members with one name (the old one never removed), and a member that never
// started has no name at all. Backends re-check that identity live right before they act, so a
// stale Member never moves or removes another member that took its place.
//
// Every method honours the context deadline and returns errors that wrap ErrUnreachable,
// ErrRefused or ErrInvalidInput, so callers can tell which one happened.
type Cluster interface {
	// Observe asks the cluster's members what they see. Members that do not answer are part of
	// the result (as evidence), not an error; an error means nothing could be observed.
	Observe(ctx context.Context) (*Snapshot, error)

	// MoveLeader moves leadership off member from to member to, both as a Snapshot gave them.
	// It is a no-op, reporting LeaderNotOnNode, when from does not lead (any more).
	MoveLeader(ctx context.Context, from, to Member) (LeaderMove, error)

	// RemoveMember removes member m, as a Snapshot gave it. It is idempotent and re-entrant:
	// call it again on every reconcile until it reports RemovalRemoved or RemovalRejected. A
	// member that is confirmed gone is RemovalRemoved, never an error; an answer that does not
	// prove the outcome either way (a leader change during the call, a claim the backend cannot
	// confirm) is RemovalInProgress.
	//
	// It is the caller's responsibility to check with CanRemoveMember that the removal keeps
	// quorum, right before calling; backends refuse only the last member.
	RemoveMember(ctx context.Context, m Member) (Removal, error)
}

// ObservedChanger is implemented by backends that can make a change through the observation one
// of their own Snapshots was built from, instead of observing every member again first. A
// caller that decided the change on that Snapshot moments ago (the quorum projection, in the
// same reconcile) saves an observation; the change then acts on what the decision saw.
//
// Important! A Snapshot is a decision's input only while it is fresh: a caller holding one from
// an earlier reconcile calls RemoveMember or MoveLeader, which observe first.
type ObservedChanger interface {
	// RemoveMemberObserved is RemoveMember through the observation snap was built from, or
	// through a new one when snap is not the backend's latest Observe (another caller observed
	// since, or snap is not the backend's).
	RemoveMemberObserved(ctx context.Context, snap *Snapshot, m Member) (Removal, error)
	// MoveLeaderObserved is MoveLeader through the observation snap was built from, or through
	// a new one when snap is not the backend's latest Observe.
	MoveLeaderObserved(ctx context.Context, snap *Snapshot, from, to Member) (LeaderMove, error)
}

// RemovalWithdrawer is implemented by backends whose removal request outlives the call that made
// it. K3s keeps `etcd.k3s.cattle.io/remove=true` as a standing order while the cluster is
// unhealthy and executes it whenever the cluster recovers, even after the caller gave up.
type RemovalWithdrawer interface {
	// WithdrawRemoval withdraws a removal of m that was requested and has not happened. It is a
	// no-op when there is nothing to withdraw; it cannot undo a removal that already happened.
	WithdrawRemoval(ctx context.Context, m Member) error
}

// RemovalState is where a member removal stands.
type RemovalState string

const (
	// RemovalRemoved means the member is confirmed not to be in the cluster any more.
	RemovalRemoved RemovalState = "Removed"
	// RemovalInProgress means the removal was requested and is not confirmed yet; call again.
	RemovalInProgress RemovalState = "InProgress"
	// RemovalRejected means etcd (or K3s) refused the removal for good; Reason says why. The
	// backend will not retry on its own.
	RemovalRejected RemovalState = "Rejected"
)

// Removal is the result of RemoveMember.
type Removal struct {
	// State is where the removal stands.
	State RemovalState
	// Member is the member the removal is about.
	Member Member
	// Reason explains the state for conditions and logs: why it was rejected, or what it waits on.
	Reason string
}

// LeaderMoveOutcome says what MoveLeader did.
type LeaderMoveOutcome string

const (
	// LeaderMoved means leadership moved to the requested member.
	LeaderMoved LeaderMoveOutcome = "Moved"
	// LeaderNotOnNode means the member to move leadership from was not the leader; nothing was
	// done.
	LeaderNotOnNode LeaderMoveOutcome = "NotLeader"
	// LeaderMoveByBackend means the backend cannot move leadership itself; Warning says what
	// happens instead (K3s moves it during removal, or an election follows the removal).
	LeaderMoveByBackend LeaderMoveOutcome = "ByBackend"
)

// LeaderMove is the result of MoveLeader.
type LeaderMove struct {
	// Outcome says what was done.
	Outcome LeaderMoveOutcome
	// Warning is set when the outcome has a consequence the caller should surface.
	Warning string
}
