package etcd

import (
	"fmt"
)

// QuorumVerdict says whether a membership change may go ahead, and why.
type QuorumVerdict struct {
	// Allowed is true only when the change keeps a healthy majority in every outcome.
	Allowed bool
	// Reason is one of the Removal*Reason constants (api/v1alpha1 re-exports them as
	// MemberRemoval*Reason).
	Reason string
	// Message explains the verdict to a person, with the numbers behind it.
	Message string
}

// quorumCounts are the numbers the rule is decided on. noSpaceVoters are the voters Unhealthy
// only because of a NOSPACE alarm (MemberHealth.NoSpace): they vote, but are not healthy.
type quorumCounts struct {
	voters, healthyVoters, noSpaceVoters, unknownVoters, learners int
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
		case mh.Health == Unknown:
			c.voters++
			c.unknownVoters++
		case mh.NoSpace:
			c.voters++
			c.noSpaceVoters++
		default:
			c.voters++
		}
	}
	return c
}

// canCommit reports whether etcd can commit a membership change now: raft needs a strict majority
// of the current voters to accept the entry. Learners take no part in that vote; a voter with a
// NOSPACE alarm does.
func (c quorumCounts) canCommit() bool { return 2*(c.healthyVoters+c.noSpaceVoters) > c.voters }

// mayCommit reports whether etcd could commit a membership change if every voter whose health
// is unknown were healthy: when it can't, quorum is lost whatever the unknown members are; when
// it can but canCommit can't, nobody knows.
func (c quorumCounts) mayCommit() bool {
	return 2*(c.healthyVoters+c.noSpaceVoters+c.unknownVoters) > c.voters
}

// keepsMajority reports whether healthy voters are a strict majority of voters even once every
// learner has been promoted: etcd may promote a caught-up learner at any moment, and a freshly
// promoted member has not proven it is healthy.
func (c quorumCounts) keepsMajority() bool { return 2*c.healthyVoters > c.voters+c.learners }

// QuorumState is whether etcd can commit a change now, by raft's rule on the assessed members.
type QuorumState string

// Quorum states (AssessQuorum).
const (
	// QuorumHolds: the voters that vote, healthy ones and those unhealthy only because of a NOSPACE
	// alarm, are a strict majority of the voters.
	QuorumHolds QuorumState = "Holds"
	// QuorumUnknown: they are not, but would be if the voters whose health is Unknown vote.
	QuorumUnknown QuorumState = "Unknown"
	// QuorumLost: they are not, whatever the voters whose health is Unknown are.
	QuorumLost QuorumState = "Lost"
)

// AssessQuorum says whether etcd can commit a change on the members (as AssessMembers assessed
// them): the rule ProjectRemoval checks before any change, for a status to report. Learners take
// no part in it.
func AssessQuorum(members []MemberHealth) QuorumState {
	c := countQuorum(members)
	switch {
	case c.canCommit():
		return QuorumHolds
	case c.mayCommit():
		return QuorumUnknown
	}
	return QuorumLost
}

// ProjectRemoval decides whether the member with targetID may be removed from the members.
//
// The rule is etcd's own, and nothing more: the change must commit now (a strict majority of the
// current voters votes; learners do not), and after it healthy voters must stay a strict
// majority of voters even if every remaining learner were promoted and counted unhealthy. Members
// whose health is Unknown count as unhealthy. A voter Unhealthy only because of a NOSPACE alarm
// counts toward committing the change (it votes) but never toward the healthy majority after it:
// a removal must not leave a cluster whose quorum rests on members that refuse writes. The last
// member is never removed.
//
// When the change cannot commit, the verdict says which of two things is true: quorum is lost
// (QuorumAlreadyLost: the voters that vote would not be a majority even if every Unknown voter were
// healthy), or it is not known (HealthUnknown: the majority depends on voters whose health is
// Unknown, as when every K3s heartbeat is stale). Neither allows the removal.
//
// Learners present before the change do not block it on their own: removing a learner never
// passes through etcd's started-members check, and etcd promotes a learner only once it has
// caught up, so refusing because "a learner might be promoted unhealthy" would leave a failed
// 1→2 or 3→4 join stuck for good.
//
// Worked cases (all voters): 3 healthy → remove any: 2 of 2, allowed. 3 with 1 down → remove a
// healthy one: 1 of 2, refused; remove the down one: 2 of 2, allowed. With learners: 1 voter and
// a learner that never caught up → remove the learner: 1 of 1, allowed. 3 voters with 1 down and
// a learner → remove the learner or the down voter: allowed; remove a healthy voter: 1 healthy of
// 3 once the learner is promoted, refused.
// See https://etcd.io/docs/v3.6/faq/#should-i-add-a-member-before-removing-an-unhealthy-member
// and https://etcd.io/docs/v3.6/learning/design-learner/.
func ProjectRemoval(members []MemberHealth, targetID uint64) QuorumVerdict {
	target, ok := findMember(members, targetID)
	if !ok {
		return QuorumVerdict{Allowed: true, Reason: RemovalNoMemberReason,
			Message: fmt.Sprintf("etcd member %x is not in the cluster; removing it changes nothing", targetID)}
	}
	if len(members) == 1 {
		return QuorumVerdict{Reason: RemovalLastMemberReason,
			Message: fmt.Sprintf("etcd member %s is the last member; removing it would destroy the cluster", target.Member)}
	}
	if before := countQuorum(members); !before.canCommit() {
		if before.mayCommit() {
			return QuorumVerdict{Reason: RemovalHealthUnknownReason,
				Message: fmt.Sprintf("whether etcd has quorum is unknown: %s; no membership change is known to be safe until enough of them are known to be healthy", before)}
		}
		return QuorumVerdict{Reason: RemovalQuorumLostReason,
			Message: fmt.Sprintf("quorum is already lost: %s; etcd cannot commit a membership change", before)}
	}
	after := countQuorum(without(members, targetID))
	if !after.keepsMajority() {
		return QuorumVerdict{Reason: RemovalWouldLoseQuorumReason,
			Message: fmt.Sprintf("removing etcd member %s would lose quorum: after it %s", target.Member, after)}
	}
	return QuorumVerdict{Allowed: true, Reason: RemovalSafeReason,
		Message: fmt.Sprintf("removing etcd member %s keeps quorum: after it %s", target.Member, after)}
}

func (c quorumCounts) String() string {
	s := fmt.Sprintf("%d of %d voters are healthy", c.healthyVoters, c.voters)
	if c.noSpaceVoters > 0 {
		s += fmt.Sprintf(" (%d refuse writes with a NOSPACE alarm but still vote)", c.noSpaceVoters)
	}
	if c.unknownVoters > 0 {
		s += fmt.Sprintf(" (the health of %d is unknown)", c.unknownVoters)
	}
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
