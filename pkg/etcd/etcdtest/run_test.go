package etcdtest

import (
	"testing"

	. "github.com/onsi/gomega" //nolint:revive // gomega's DSL reads best dot-imported
)

func TestCases_everyCaseHasABodyAndAGroup(t *testing.T) {
	g := NewWithT(t)
	grouped := map[Case]int{}
	for _, gr := range groups {
		g.Expect(gr.spec.Members).To(BeNumerically(">=", 1))
		for _, c := range gr.cases {
			grouped[c]++
		}
	}
	for _, c := range Cases() {
		g.Expect(caseFuncs).To(HaveKey(c))
		g.Expect(grouped[c]).To(Equal(1), "case %s must be in exactly one group", c)
	}
	g.Expect(caseFuncs).To(HaveLen(len(Cases())))
}

// allNA declares every case not applicable; Start must never be called.
type allNA struct{ t *testing.T }

func (h allNA) Start(*testing.T, Spec) *Env {
	h.t.Error("Start called although every case is not applicable")
	return nil
}

func (allNA) NotApplicable() map[Case]string {
	na := map[Case]string{}
	for _, c := range Cases() {
		na[c] = "not applicable in this test"
	}
	return na
}

func TestRun_notApplicableCasesAreNotRun(t *testing.T) {
	Run(t, allNA{t: t})
}
