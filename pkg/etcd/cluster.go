package etcd

import "context"

// Cluster is the etcd of one workload cluster, as a control-plane provider sees it. Backends
// implement it; controllers and providers consume it.
//
// Every method honours the context deadline and returns errors that wrap ErrUnreachable,
// ErrRefused or ErrInvalidInput, so callers can tell which one happened.
type Cluster interface {
	// Observe asks the cluster's members what they see. Members that do not answer are part of
	// the result (as evidence), not an error; an error means nothing could be observed.
	Observe(ctx context.Context) (*Snapshot, error)

	// MoveLeader moves leadership off the member on fromNode to the member on toNode. It is a
	// no-op, reporting LeaderNotOnNode, when the member on fromNode is not the leader.
	MoveLeader(ctx context.Context, fromNode, toNode string) (LeaderMove, error)

	// RemoveMember removes the member hosted on nodeName. It is idempotent and re-entrant: call
	// it again on every reconcile until it reports RemovalRemoved or RemovalRejected. A member
	// that is already gone is RemovalRemoved, never an error.
	//
	// It is the caller's responsibility to check with ProjectRemoval that the removal keeps
	// quorum, right before calling; backends refuse only the last member.
	RemoveMember(ctx context.Context, nodeName string) (Removal, error)
}

// RemovalState is where a member removal stands.
type RemovalState string

const (
	// RemovalRemoved means the member is not in the cluster any more.
	RemovalRemoved RemovalState = "Removed"
	// RemovalInProgress means the removal was requested and is not confirmed yet; call again.
	RemovalInProgress RemovalState = "InProgress"
	// RemovalRejected means etcd (or K3s) refused the removal; Reason says why. The backend will
	// not retry on its own.
	RemovalRejected RemovalState = "Rejected"
)

// Removal is the result of RemoveMember.
type Removal struct {
	// State is where the removal stands.
	State RemovalState
	// Member is the member the removal is about, when known.
	Member Member
	// Reason explains the state for conditions and logs: why it was rejected, or what it waits on.
	Reason string
}

// LeaderMoveOutcome says what MoveLeader did.
type LeaderMoveOutcome string

const (
	// LeaderMoved means leadership moved to the requested member.
	LeaderMoved LeaderMoveOutcome = "Moved"
	// LeaderNotOnNode means the member on fromNode was not the leader; nothing was done.
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
