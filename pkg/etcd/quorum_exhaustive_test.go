package etcd

import (
	"fmt"
	"testing"
)

// TestProjectRemoval_exhaustive compares ProjectRemoval with a brute-force reading of the rule
// for every cluster of 1 to 7 members, every mix of voter/learner and healthy/unhealthy/unknown,
// and every member as the target.
func TestProjectRemoval_exhaustive(t *testing.T) {
	kinds := []struct {
		learner bool
		health  Health
	}{
		{false, Healthy}, {false, Unhealthy}, {false, Unknown},
		{true, Healthy}, {true, Unhealthy}, {true, Unknown},
	}
	checked, disagreements := 0, 0
	for n := 1; n <= 7; n++ {
		mix := make([]int, n)
		for {
			ms := make([]MemberHealth, n)
			for i, k := range mix {
				ms[i] = MemberHealth{Member: Member{ID: uint64(i + 1), Name: node(i), IsLearner: kinds[k].learner}, Health: kinds[k].health}
			}
			for target := range ms {
				checked++
				got := ProjectRemoval(ms, ms[target].Member.ID).Allowed
				if want := bruteForceRemovalSafe(ms, target); got != want {
					disagreements++
					if disagreements <= 10 {
						t.Errorf("members %s, remove #%d: ProjectRemoval says %t, brute force says %t", describe(ms), target, got, want)
					}
				}
			}
			if !nextMix(mix, len(kinds)) {
				break
			}
		}
	}
	fmt.Printf("quorum projection: %d states checked against brute force, %d disagreements\n", checked, disagreements)
	if checked != 2284278 {
		t.Fatalf("expected to check sum(n*6^n, n=1..7) = 2284278 states, checked %d", checked)
	}
}

// bruteForceRemovalSafe is the rule read literally: the removal is safe when the cluster has more
// than one member and, for every subset of learners that may get promoted while the change is in
// flight, healthy voters are a strict majority of voters both now (so etcd can commit the change)
// and after the removal. A promoted learner is a voter that has not proven healthy.
func bruteForceRemovalSafe(ms []MemberHealth, target int) bool {
	if len(ms) <= 1 {
		return false
	}
	var learners []int
	for i, m := range ms {
		if m.Member.IsLearner {
			learners = append(learners, i)
		}
	}
	for subset := 0; subset < 1<<len(learners); subset++ {
		promoted := map[int]bool{}
		for b, i := range learners {
			if subset&(1<<b) != 0 {
				promoted[i] = true
			}
		}
		if !strictHealthyMajority(ms, promoted, -1) || !strictHealthyMajority(ms, promoted, target) {
			return false
		}
	}
	return true
}

func strictHealthyMajority(ms []MemberHealth, promoted map[int]bool, removed int) bool {
	voters, healthy := 0, 0
	for i, m := range ms {
		if i == removed {
			continue
		}
		switch {
		case promoted[i]:
			voters++
		case !m.Member.IsLearner:
			voters++
			if m.Health == Healthy {
				healthy++
			}
		}
	}
	return 2*healthy > voters
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
		s += kind + string(m.Health[:1]) + " "
	}
	return s
}
