package etcd

import (
	"fmt"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// QuorumVerdict says whether a membership change may go ahead, and why.
type QuorumVerdict struct {
	// Allowed is true only when the change keeps a healthy majority in every outcome.
	Allowed bool
	// Reason is one of the v1alpha1 MemberRemoval*Reason constants.
	Reason string
	// Message explains the verdict to a person, with the numbers behind it.
	Message string
}

// quorumCounts are the numbers the rule is decided on.
type quorumCounts struct {
	voters, healthyVoters, learners int
}

func countQuorum(members []MemberHealth) quorumCounts {
	var c quorumCounts
	for _, mh := range members {
		switch {
		case mh.Member.IsLearner:
			c.learners++
		case mh.Health == Healthy:
			c.voters++
			c.healthyVoters++
		default:
			c.voters++
		}
	}
	return c
}

// worstVoters is the voter count once every learner has been promoted: etcd may promote a
// learner at any moment, and a freshly promoted member has not proven it is healthy.
func (c quorumCounts) worstVoters() int { return c.voters + c.learners }

// hasQuorum reports whether healthy voters are a strict majority even in the worst case.
func (c quorumCounts) hasQuorum() bool { return 2*c.healthyVoters > c.worstVoters() }

// ProjectRemoval decides whether the member with targetID may be removed from the members.
//
// The rule: etcd must be able to commit the change now, and after it healthy voters must be a
// strict majority of voters, whatever happens to in-flight changes. Any learner may be promoted
// at any moment and then counts as an unhealthy voter; members whose health is Unknown count as
// unhealthy. Removing an unhealthy member stays possible when it keeps quorum (5 members with 2
// down: removing a down one leaves 3 of 4 healthy). The last member is never removed.
//
// Worked cases (all voters): 3 healthy → remove any: 2 of 2, allowed. 3 with 1 down → remove a
// healthy one: 1 of 2, refused; remove the down one: 2 of 2, allowed. 2 healthy + 1 learner →
// remove a healthy voter: 1 healthy of 2 once the learner is promoted, refused.
// See https://etcd.io/docs/v3.6/faq/#should-i-add-a-member-before-removing-an-unhealthy-member.
func ProjectRemoval(members []MemberHealth, targetID uint64) QuorumVerdict {
	target, ok := findMember(members, targetID)
	if !ok {
		return QuorumVerdict{Allowed: true, Reason: v1alpha1.MemberRemovalNoMemberReason,
			Message: fmt.Sprintf("etcd member %x is not in the cluster; removing it changes nothing", targetID)}
	}
	if len(members) == 1 {
		return QuorumVerdict{Reason: v1alpha1.MemberRemovalLastMemberReason,
			Message: fmt.Sprintf("etcd member %s is the last member; removing it would destroy the cluster", target.Member)}
	}
	before := countQuorum(members)
	if 2*before.healthyVoters <= before.voters {
		return QuorumVerdict{Reason: v1alpha1.MemberRemovalQuorumLostReason,
			Message: fmt.Sprintf("quorum is already lost: %s; etcd cannot commit a membership change", before)}
	}
	if !before.hasQuorum() {
		return QuorumVerdict{Reason: v1alpha1.MemberRemovalWouldLoseQuorumReason,
			Message: fmt.Sprintf("a pending learner promotion would lose quorum even without a removal: %s; wait until learners are promoted and healthy", before)}
	}
	after := countQuorum(without(members, targetID))
	if !after.hasQuorum() {
		return QuorumVerdict{Reason: v1alpha1.MemberRemovalWouldLoseQuorumReason,
			Message: fmt.Sprintf("removing etcd member %s would lose quorum: after it %s", target.Member, after)}
	}
	return QuorumVerdict{Allowed: true, Reason: v1alpha1.MemberRemovalSafeReason,
		Message: fmt.Sprintf("removing etcd member %s keeps quorum: after it %s", target.Member, after)}
}

func (c quorumCounts) String() string {
	s := fmt.Sprintf("%d of %d voters are healthy", c.healthyVoters, c.voters)
	if c.learners > 0 {
		s += fmt.Sprintf(", and %d learner(s) may be promoted at any moment", c.learners)
	}
	return s
}

func findMember(members []MemberHealth, id uint64) (MemberHealth, bool) {
	for _, mh := range members {
		if mh.Member.ID == id {
			return mh, true
		}
	}
	return MemberHealth{}, false
}

func without(members []MemberHealth, id uint64) []MemberHealth {
	out := make([]MemberHealth, 0, len(members))
	for _, mh := range members {
		if mh.Member.ID != id {
			out = append(out, mh)
		}
	}
	return out
}
