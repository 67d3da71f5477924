package etcdtest

import (
	"fmt"
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

func TestCheckNotApplicable(t *testing.T) {
	tests := []struct {
		name string
		na   map[Case]string
		want []string
	}{
		{name: "optional cases may be declared with a reason", na: map[Case]string{NoSpaceAlarm: "blind to alarms", WrongCA: "no CA"}},
		{name: "a required case may not", na: map[Case]string{MemberKilled: "cannot kill"},
			want: []string{"harness declares required case MemberKilled not applicable (cannot kill): every backend must run it"}},
		{name: "every required case is checked", na: requiredNA(), want: requiredErrors()},
		{name: "an unknown case", na: map[Case]string{"Renamed": "x"}, want: []string{`harness declares unknown case "Renamed" not applicable`}},
		{name: "a reason is required", na: map[Case]string{WrongCA: " "}, want: []string{"harness declares case WrongCA not applicable without a reason"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var got []string
			for _, err := range checkNotApplicable(tt.na) {
				got = append(got, err.Error())
			}
			g.Expect(got).To(ConsistOf(tt.want))
		})
	}
}

func requiredNA() map[Case]string {
	na := map[Case]string{}
	for _, c := range Required() {
		na[c] = "r"
	}
	return na
}

func requiredErrors() []string {
	var out []string
	for _, c := range Required() {
		out = append(out, fmt.Sprintf("harness declares required case %s not applicable (r): every backend must run it", c))
	}
	return out
}

func TestRequired_coversWhatEveryProviderReliesOn(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Required()).To(ContainElements(Healthy1, Healthy3, Healthy5, MemberKilled, RemoveLosesQuorum,
		RemoveLeader, RemoveRemoved, APIServerDown, UnknownNotRemovable))
	for _, c := range Required() {
		g.Expect(Cases()).To(ContainElement(c))
	}
}

func TestApplicableCases(t *testing.T) {
	g := NewWithT(t)
	gr := group{spec: Spec{Members: 3}, cases: []Case{WrongCA, MissingCA}}
	g.Expect(applicableCases(gr, map[Case]string{WrongCA: "x"})).To(Equal([]Case{MissingCA}))
	g.Expect(applicableCases(gr, map[Case]string{WrongCA: "x", MissingCA: "y"})).To(BeEmpty(), "no cluster is started for it")
}
