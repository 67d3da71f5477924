package etcd

import (
	"fmt"
	"slices"
	"testing"
)

// memberKind is one kind of member the exhaustive tests mix.
type memberKind struct {
	learner bool
	health  Health
	noSpace bool
}

func (k memberKind) member(i int) MemberHealth {
	return MemberHealth{Member: Member{ID: uint64(i + 1), Name: node(i), IsLearner: k.learner}, Health: k.health, NoSpace: k.noSpace}
}

// kindsOfMembers are every mix of voter/learner and healthy/unhealthy/unknown.
var kindsOfMembers = []memberKind{
	{false, Healthy, false}, {false, Unhealthy, false}, {false, Unknown, false},
	{true, Healthy, false}, {true, Unhealthy, false}, {true, Unknown, false},
}

// TestProjectRemoval_exhaustive compares ProjectRemoval with a brute-force reading of the rule
// for every cluster of 1 to 7 members, every mix of voter/learner and healthy/unhealthy/unknown,
// and every member as the target.
func TestProjectRemoval_exhaustive(t *testing.T) {
	checked := checkRemovalsExhaustively(t, kindsOfMembers, 7)
	if checked != 2284278 {
		t.Fatalf("expected to check sum(n*6^n, n=1..7) = 2284278 states, checked %d", checked)
	}
}

// TestProjectRemoval_exhaustiveNoSpace adds voters with only a NOSPACE alarm (and learners with
// one) to the mix, for every cluster of 1 to 6 members.
func TestProjectRemoval_exhaustiveNoSpace(t *testing.T) {
	kinds := append(slices.Clone(kindsOfMembers), memberKind{false, Unhealthy, true}, memberKind{true, Unhealthy, true})
	checked := checkRemovalsExhaustively(t, kinds, 6)
	if checked != 1754760 {
		t.Fatalf("expected to check sum(n*8^n, n=1..6) = 1754760 states, checked %d", checked)
	}
}

func checkRemovalsExhaustively(t *testing.T, kinds []memberKind, maxMembers int) int {
	t.Helper()
	checked, disagreements := 0, 0
	for n := 1; n <= maxMembers; n++ {
		mix := make([]int, n)
		for {
			ms := make([]MemberHealth, n)
			for i, k := range mix {
				ms[i] = kinds[k].member(i)
			}
			if got, want := AssessQuorum(ms), bruteForceQuorumState(ms); got != want {
				disagreements++
				if disagreements <= 10 {
					t.Errorf("members %s: AssessQuorum says %s, brute force says %s", describe(ms), got, want)
				}
			}
			for target := range ms {
				checked++
				verdict := ProjectRemoval(ms, ms[target].Member.ID)
				got := verdict.Allowed
				if want := bruteForceRemovalSafe(ms, target); got != want {
					disagreements++
					if disagreements <= 10 {
						t.Errorf("members %s, remove #%d: ProjectRemoval says %t, brute force says %t", describe(ms), target, got, want)
					}
				}
				if claimsLost, lost := verdict.Reason == RemovalQuorumLostReason, bruteForceQuorumLost(ms); claimsLost != lost && (claimsLost || verdict.Reason == RemovalHealthUnknownReason) {
					disagreements++
					if disagreements <= 10 {
						t.Errorf("members %s, remove #%d: ProjectRemoval says %s (%s), brute force says quorum lost: %t", describe(ms), target, verdict.Reason, verdict.Message, lost)
					}
				}
			}
			if !nextMix(mix, len(kinds)) {
				break
			}
		}
	}
	fmt.Printf("quorum projection: %d states checked against brute force, %d disagreements\n", checked, disagreements)
	return checked
}

// bruteForceRemovalSafe decides the removal from etcd's raft rules, written from first principles
// and not from ProjectRemoval:
//
//   - A membership change is one raft log entry. It commits only when a strict majority of the
//     voters of the configuration it is proposed in have it: the voters of the current
//     configuration that answer must form a quorum. Learners never count toward a quorum. A voter
//     whose only fault is a NOSPACE alarm answers and votes: etcd refuses its writes, but raft
//     entries still commit through it.
//   - After the change, a quorum of healthy voters must remain: a NOSPACE voter refuses writes
//     until a person or maintenance frees space, so it does not count there.
//   - Once applied, the configuration has the other voters. etcd may then promote any learner that
//     caught up, one at a time and at any moment; a promoted learner is a voter that has not proven
//     it is healthy. Every configuration that can follow (any subset of learners promoted) must
//     still have a healthy quorum, or the cluster can lose it without anyone removing anything.
//   - The last member is never removed.
//
// Quorums are counted by enumerating configurations as sets of member indexes.
func bruteForceRemovalSafe(ms []MemberHealth, target int) bool {
	if len(ms) <= 1 {
		return false
	}
	current := config{}
	for i, m := range ms {
		if !m.Member.IsLearner {
			current[i] = true
		}
	}
	if !hasVotingQuorum(ms, current) {
		return false
	}
	var learners []int
	for i, m := range ms {
		if m.Member.IsLearner && i != target {
			learners = append(learners, i)
		}
	}
	for subset := 0; subset < 1<<len(learners); subset++ {
		next, promoted := config{}, config{}
		for i := range current {
			if i != target {
				next[i] = true
			}
		}
		for b, i := range learners {
			if subset&(1<<b) != 0 {
				next[i], promoted[i] = true, true
			}
		}
		if !hasHealthyQuorum(ms, next, promoted) {
			return false
		}
	}
	return true
}

// bruteForceQuorumLost decides whether quorum is known to be lost: in no assignment of health to
// the members whose health is Unknown do the voters of the current configuration that vote
// (healthy, or with only a NOSPACE alarm) form a quorum. When some assignment gives one, quorum
// is not lost, only not known.
func bruteForceQuorumLost(ms []MemberHealth) bool {
	voters := config{}
	var unknown []int
	for i, m := range ms {
		if !m.Member.IsLearner {
			voters[i] = true
			if m.Health == Unknown {
				unknown = append(unknown, i)
			}
		}
	}
	for subset := 0; subset < 1<<len(unknown); subset++ {
		assumed := append([]MemberHealth(nil), ms...)
		for b, i := range unknown {
			if subset&(1<<b) != 0 {
				assumed[i].Health = Healthy
			}
		}
		if hasVotingQuorum(assumed, voters) {
			return false
		}
	}
	return true
}

// bruteForceQuorumState is whether the current voters can commit: they hold quorum when the ones
// that vote are a majority, have lost it when no health of the unknown ones gives a majority, and
// otherwise it is unknown.
func bruteForceQuorumState(ms []MemberHealth) QuorumState {
	voters := config{}
	for i, m := range ms {
		if !m.Member.IsLearner {
			voters[i] = true
		}
	}
	switch {
	case hasVotingQuorum(ms, voters):
		return QuorumHolds
	case bruteForceQuorumLost(ms):
		return QuorumLost
	}
	return QuorumUnknown
}

// config is a raft configuration: the set of voting members, by index.
type config map[int]bool

// hasHealthyQuorum reports whether the members of cfg that are proven healthy (promoted ones are
// not) are more than half of cfg. An empty configuration has no quorum.
func hasHealthyQuorum(ms []MemberHealth, cfg, promoted config) bool {
	healthy := 0
	for i := range cfg {
		if !promoted[i] && ms[i].Health == Healthy {
			healthy++
		}
	}
	return healthy > len(cfg)/2
}

// hasVotingQuorum reports whether the members of cfg that vote (healthy ones, and those whose
// only fault is a NOSPACE alarm) are more than half of cfg.
func hasVotingQuorum(ms []MemberHealth, cfg config) bool {
	voting := 0
	for i := range cfg {
		if ms[i].Health == Healthy || (ms[i].Health == Unhealthy && ms[i].NoSpace) {
			voting++
		}
	}
	return voting > len(cfg)/2
}

// nextMix advances an odometer over member kinds; false when it wrapped around.
func nextMix(mix []int, base int) bool {
	for i := range mix {
		mix[i]++
		if mix[i] < base {
			return true
		}
		mix[i] = 0
	}
	return false
}

func describe(ms []MemberHealth) string {
	s := ""
	for _, m := range ms {
		kind := "V"
		if m.Member.IsLearner {
			kind = "L"
		}
		health := string(m.Health[:1])
		switch {
		case m.Health == Unknown:
			health = "?"
		case m.NoSpace:
			health = "N"
		}
		s += kind + health + " "
	}
	return s
}

// TestProjectChanges_exhaustive compares ProjectChanges with a brute-force reading of raft's rules
// for every cluster of 1 to 5 members, every mix of voter/learner and healthy/unhealthy/unknown,
// and every split of the members into untouched, removed (in index order) and stopping to answer
// while still members (their Machine's infrastructure deleted with nothing removing them first).
func TestProjectChanges_exhaustive(t *testing.T) {
	kinds := kindsOfMembers
	const untouched, removed, failing = 0, 1, 2
	checked, disagreements := 0, 0
	for n := 1; n <= 5; n++ {
		mix, roles := make([]int, n), make([]int, n)
		for {
			ms := make([]MemberHealth, n)
			for i, k := range mix {
				ms[i] = kinds[k].member(i)
			}
			for {
				var targets, fails []Member
				var removals, failures []int
				for i, r := range roles {
					switch r {
					case removed:
						targets, removals = append(targets, ms[i].Member), append(removals, i)
					case failing:
						fails, failures = append(fails, ms[i].Member), append(failures, i)
					}
				}
				checked++
				verdict := ProjectChanges(ms, targets, fails)
				if want := bruteForceChangesSafe(ms, removals, failures); verdict.Allowed != want {
					disagreements++
					if disagreements <= 10 {
						t.Errorf("members %s, remove %v, stop %v: ProjectChanges says %t (%s), brute force says %t", describe(ms), removals, failures, verdict.Allowed, verdict.Message, want)
					}
				}
				if claimsLost, lost := verdict.Reason == RemovalQuorumLostReason, bruteForceQuorumLost(ms); claimsLost != lost && (claimsLost || verdict.Reason == RemovalHealthUnknownReason) {
					disagreements++
					if disagreements <= 10 {
						t.Errorf("members %s, remove %v, stop %v: ProjectChanges says %s (%s), brute force says quorum lost: %t", describe(ms), removals, failures, verdict.Reason, verdict.Message, lost)
					}
				}
				if !nextMix(roles, 3) {
					break
				}
			}
			if !nextMix(mix, len(kinds)) {
				break
			}
		}
	}
	fmt.Printf("quorum projection with failures: %d states checked against brute force, %d disagreements\n", checked, disagreements)
	if checked != 2000718 {
		t.Fatalf("expected to check sum(18^n, n=1..5) = 2000718 states, checked %d", checked)
	}
}

// bruteForceChangesSafe decides, from raft's rules and not from ProjectChanges, whether the
// members at removals may be removed in that order while the members at failures stop answering,
// at any moment in between (the infrastructure of a Machine goes when Cluster API gets to it):
// every interleaving must be safe.
//
//   - A removal is the membership change of bruteForceRemovalSafe: it commits only if the healthy
//     voters of the current configuration are a quorum, after it every configuration that can
//     follow (any subset of learners promoted, promoted ones unproven) must have a healthy
//     quorum, and the last member is never removed.
//   - A member that stops answering stays in the configuration: it still counts toward the quorum
//     size and no longer as healthy, and after it every configuration that can follow must still
//     have a healthy quorum. A learner, or a voter that is not healthy, stopping changes nothing
//     that counts (a learner has no vote, a promoted one is unproven anyway), and asks nothing.
func bruteForceChangesSafe(ms []MemberHealth, removals, failures []int) bool {
	present := config{}
	for i := range ms {
		present[i] = true
	}
	return safeFrom(append([]MemberHealth(nil), ms...), present, removals, failures)
}

// safeFrom reports whether every interleaving of what is left to happen is safe from this state:
// present are the members still in the cluster.
func safeFrom(ms []MemberHealth, present config, removals, failures []int) bool {
	if len(removals) > 0 {
		t := removals[0]
		voters := config{}
		for i := range present {
			if !ms[i].Member.IsLearner {
				voters[i] = true
			}
		}
		if len(present) <= 1 || !hasHealthyQuorum(ms, voters, nil) {
			return false
		}
		next := config{}
		for i := range present {
			if i != t {
				next[i] = true
			}
		}
		if !everyFollowingConfigHasQuorum(ms, next) || !safeFrom(ms, next, removals[1:], failures) {
			return false
		}
	}
	for k, f := range failures {
		rest := append(append([]int(nil), failures[:k]...), failures[k+1:]...)
		if !present[f] || ms[f].Member.IsLearner || ms[f].Health != Healthy {
			if !safeFrom(ms, present, removals, rest) {
				return false
			}
			continue
		}
		after := append([]MemberHealth(nil), ms...)
		after[f].Health = Unhealthy
		if !everyFollowingConfigHasQuorum(after, present) || !safeFrom(after, present, removals, rest) {
			return false
		}
	}
	return true
}

// everyFollowingConfigHasQuorum reports whether the voters of present, with any subset of its
// learners promoted (promoted ones unproven), have a healthy quorum.
func everyFollowingConfigHasQuorum(ms []MemberHealth, present config) bool {
	var learners []int
	voters := config{}
	for i := range present {
		if ms[i].Member.IsLearner {
			learners = append(learners, i)
		} else {
			voters[i] = true
		}
	}
	for subset := 0; subset < 1<<len(learners); subset++ {
		cfg, promoted := config{}, config{}
		for i := range voters {
			cfg[i] = true
		}
		for b, i := range learners {
			if subset&(1<<b) != 0 {
				cfg[i], promoted[i] = true, true
			}
		}
		if !hasHealthyQuorum(ms, cfg, promoted) {
			return false
		}
	}
	return true
}
