package membership

import (
	"slices"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Observation is a snapshot plus the decision and the answers it was built from, for MoveLeader
// and RemoveMember to pick a member to send their request through.
type Observation struct {
	// Snap is the snapshot the backend built, its members placed.
	Snap *etcd.Snapshot
	// Decision is what the snapshot was decided from.
	Decision Decision
	// Answers are sorted by place.
	Answers []Answer
	// Transport reaches the members as they were reached for the answers (with the same
	// credentials).
	Transport Transport
}

// AnswerOf returns the answer member id gave about itself, as a member of the observed cluster.
func (o *Observation) AnswerOf(id uint64) (Answer, bool) {
	for _, a := range o.Answers {
		if id != 0 && a.SelfID == id && o.Decision.OfCluster(a) {
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

// RequestOrder orders the places to send a request about member targetID through: the leader first (it
// commits the change without a hop), then the other voters of the cluster that answered, in
// place order, and the target's own place last, only as a last resort (a removed member stops,
// and its answer may be lost).
func (o *Observation) RequestOrder(targetID uint64) []string {
	var order []string
	target, hasTarget := o.AnswerOf(targetID)
	if l, ok := o.AnswerOf(o.Snap.LeaderID); ok && (!hasTarget || l.Where != target.Where) && o.answeredVoter(l) {
		order = append(order, l.Where)
	}
	for _, a := range o.Answers {
		if (!hasTarget || a.Where != target.Where) && !slices.Contains(order, a.Where) && o.answeredVoter(a) {
			order = append(order, a.Where)
		}
	}
	if hasTarget && o.answeredVoter(target) {
		order = append(order, target.Where)
	}
	return order
}

// answeredVoter reports whether a is the answer of a voting member of the observed cluster,
// with a member list.
func (o *Observation) answeredVoter(a Answer) bool {
	m, ok := o.Snap.MemberByID(a.SelfID)
	return o.Decision.OfCluster(a) && ok && !m.IsLearner && a.Members != nil
}
