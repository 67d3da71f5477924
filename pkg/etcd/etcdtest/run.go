package etcdtest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// group is a run of cases that share one workload cluster, in order: each leaves the cluster in
// a state the next one expects, so a suite run starts as few clusters as possible.
type group struct {
	spec  Spec
	cases []Case
}

// groups is the suite's plan. Read-only cases and cases that build on each other share a
// cluster; cases whose faults cannot be undone get their own.
var groups = []group{
	{spec: Spec{Members: 1}, cases: []Case{Healthy1}},
	{spec: Spec{Members: 3}, cases: []Case{Healthy3, MemberKilled, RemoveLosesQuorum, MemberRestarted, UnknownNotRemovable}},
	{spec: Spec{Members: 5}, cases: []Case{Healthy5, NoSpaceAlarm}},
	{spec: Spec{Members: 3}, cases: []Case{Learner}},
	{spec: Spec{Members: 3}, cases: []Case{NeverStarted}},
	{spec: Spec{Members: 3}, cases: []Case{DuplicateName}},
	{spec: Spec{Members: 3}, cases: []Case{SplitBrain}},
	{spec: Spec{Members: 3}, cases: []Case{RemoveLeader, RemoveRemoved}},
	{spec: Spec{Members: 3}, cases: []Case{RemoveLeaderDirectly}},
	{spec: Spec{Members: 3}, cases: []Case{TransientDuringRemoval}},
	{spec: Spec{Members: 3}, cases: []Case{WrongCA, MissingCA}},
	{spec: Spec{Members: 3, Isolated: true}, cases: []Case{APIServerDown}},
}

// caseFuncs maps each case to its body.
var caseFuncs = map[Case]func(t *testing.T, env *Env){
	Healthy1:               testHealthy,
	Healthy3:               testHealthy,
	Healthy5:               testHealthy,
	MemberKilled:           testMemberKilled,
	MemberRestarted:        testMemberRestarted,
	UnknownNotRemovable:    testUnknownNotRemovable,
	NoSpaceAlarm:           testNoSpaceAlarm,
	Learner:                testLearner,
	NeverStarted:           testNeverStarted,
	DuplicateName:          testDuplicateName,
	SplitBrain:             testSplitBrain,
	RemoveLeader:           testRemoveLeader,
	RemoveRemoved:          testRemoveRemoved,
	RemoveLeaderDirectly:   testRemoveLeaderDirectly,
	TransientDuringRemoval: testTransientDuringRemoval,
	RemoveLosesQuorum:      testRemoveLosesQuorum,
	WrongCA:                testWrongCA,
	MissingCA:              testMissingCA,
	APIServerDown:          testAPIServerDown,
}

// Run runs every conformance case against the backend h starts, one subtest per case, and
// logs a summary: how long each case took and which cases were not applicable, and why. Cases
// declared not applicable are not run and do not count as passed. Declaring a Required case not
// applicable fails the test, and so does a case the suite does not know, so that a renamed case
// cannot silently drop out.
func Run(t *testing.T, h Harness) {
	t.Helper()
	na := h.NotApplicable()
	for _, err := range checkNotApplicable(na) {
		t.Error(err)
	}
	s := &summary{start: time.Now()}
	t.Cleanup(func() { s.log(t, na) })
	for _, g := range groups {
		runGroup(t, h, g, na, s)
	}
}

// checkNotApplicable returns what is wrong with a harness's not-applicable declarations.
func checkNotApplicable(na map[Case]string) []error {
	var errs []error
	for _, c := range Cases() {
		if reason, ok := na[c]; ok && slices.Contains(Required(), c) {
			errs = append(errs, fmt.Errorf("harness declares required case %s not applicable (%s): every backend must run it", c, reason))
		}
	}
	for c, reason := range na {
		switch {
		case !slices.Contains(Cases(), c):
			errs = append(errs, fmt.Errorf("harness declares unknown case %q not applicable", c))
		case strings.TrimSpace(reason) == "":
			errs = append(errs, fmt.Errorf("harness declares case %s not applicable without a reason", c))
		}
	}
	return errs
}

// runGroup starts one cluster for the applicable cases of g and runs them in order.
func runGroup(t *testing.T, h Harness, g group, na map[Case]string, s *summary) {
	applicable := applicableCases(g, na)
	if len(applicable) == 0 {
		return
	}
	t.Run(groupName(g, applicable), func(t *testing.T) {
		start := time.Now()
		env := h.Start(t, g.spec)
		s.record(fmt.Sprintf("start %d-member cluster", g.spec.Members), time.Since(start), true, false)
		for _, c := range applicable {
			start := time.Now()
			ok := t.Run(string(c), func(t *testing.T) { caseFuncs[c](t, env) })
			s.record(string(c), time.Since(start), ok, true)
			if !ok {
				// The following cases build on this one's end state; they would fail for the
				// same reason.
				return
			}
		}
	})
}

// applicableCases are the cases of g that na does not declare not applicable, in order.
func applicableCases(g group, na map[Case]string) []Case {
	var out []Case
	for _, c := range g.cases {
		if _, ok := na[c]; !ok {
			out = append(out, c)
		}
	}
	return out
}

func groupName(g group, cases []Case) string {
	names := make([]string, 0, len(cases))
	for _, c := range cases {
		names = append(names, string(c))
	}
	return fmt.Sprintf("%dMembers/%s", g.spec.Members, strings.Join(names, "+"))
}

// summary collects what ran, for the log at the end.
type summary struct {
	start          time.Time
	mu             sync.Mutex
	lines          []string
	passed, failed int
}

func (s *summary) record(what string, took time.Duration, ok, isCase bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	status := "ok"
	if !ok {
		status = "FAILED"
	}
	switch {
	case isCase && ok:
		s.passed++
	case isCase:
		s.failed++
	}
	s.lines = append(s.lines, fmt.Sprintf("  %-32s %-6s %s", what, status, took.Round(time.Millisecond)))
}

func (s *summary) log(t *testing.T, na map[Case]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "etcd.Cluster conformance summary (%s total): %d passed, %d failed, %d not applicable, %d not run\n",
		time.Since(s.start).Round(time.Millisecond), s.passed, s.failed, len(na), len(Cases())-s.passed-s.failed-len(na))
	b.WriteString(strings.Join(s.lines, "\n"))
	if len(na) > 0 {
		b.WriteString("\nNOT APPLICABLE (not run, not counted as passed):")
		for _, c := range Cases() {
			if reason, ok := na[c]; ok {
				fmt.Fprintf(&b, "\n  %-32s %s", c, reason)
			}
		}
	}
	t.Log(b.String())
}
