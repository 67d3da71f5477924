package membership

import (
	"slices"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Observation is a snapshot plus the view and the answers it was built from, for MoveLeader
// and RemoveMember to pick a member to send their request through.
type Observation struct {
	// Snap is the snapshot the backend built, its members placed.
	Snap *etcd.Snapshot
	// View is what the snapshot was decided from.
	View View
	// Answers are sorted by place.
	Answers []Answer
	// Transport reaches the members as they were reached for the answers (with the same
	// credentials).
	Transport Transport
}

// Self returns the answer member id gave about itself, as a member of the observed cluster.
func (o *Observation) Self(id uint64) (Answer, bool) {
	for _, a := range o.Answers {
		if id != 0 && a.SelfID == id && o.View.OfCluster(a) {
			return a, true
		}
	}
	return Answer{}, false
}

// At returns the answer given at where.
func (o *Observation) At(where string) (Answer, bool) {
	for _, a := range o.Answers {
		if a.Where == where {
			return a, true
		}
	}
	return Answer{}, false
}

// Path orders the places to send a request about member targetID through: the leader first (it
// commits the change without a hop), then the other voters of the cluster that answered, in
// place order, and the target's own place last, only as a last resort (a removed member stops,
// and its answer may be lost).
func (o *Observation) Path(targetID uint64) []string {
	var path []string
	target, hasTarget := o.Self(targetID)
	if l, ok := o.Self(o.Snap.LeaderID); ok && (!hasTarget || l.Where != target.Where) && o.answeredVoter(l) {
		path = append(path, l.Where)
	}
	for _, a := range o.Answers {
		if (!hasTarget || a.Where != target.Where) && !slices.Contains(path, a.Where) && o.answeredVoter(a) {
			path = append(path, a.Where)
		}
	}
	if hasTarget && o.answeredVoter(target) {
		path = append(path, target.Where)
	}
	return path
}

// answeredVoter reports whether a is the answer of a voting member of the observed cluster,
// with a member list.
func (o *Observation) answeredVoter(a Answer) bool {
	m, ok := o.Snap.MemberByID(a.SelfID)
	return o.View.OfCluster(a) && ok && !m.IsLearner && a.Members != nil
}
