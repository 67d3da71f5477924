package provider_test

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/provider"
)

func TestPreflight(t *testing.T) {
	tests := []struct {
		name     string
		change   func(s *etcd.Snapshot, ms []etcd.Machine) []etcd.Machine
		removing []string
		healthy  bool
		// want is in the message of the first problem; "" when healthy.
		want        string
		wantMachine string
	}{
		{name: "three healthy members that agree pass", healthy: true},
		{name: "a broken member blocks a scale-down of another Machine",
			change:   func(s *etcd.Snapshot, ms []etcd.Machine) []etcd.Machine { breakMember(s, 2); return ms },
			removing: []string{"m-cp-0"}, want: "not answering", wantMachine: "m-cp-2"},
		{name: "a broken member does not block the scale-down or rollout of its own Machine",
			change:   func(s *etcd.Snapshot, ms []etcd.Machine) []etcd.Machine { breakMember(s, 2); return ms },
			removing: []string{"m-cp-2"}, healthy: true},
		{name: "a member whose list differs is left out with its Machine",
			change: func(s *etcd.Snapshot, ms []etcd.Machine) []etcd.Machine {
				s.Evidence[1].Members = s.Members[:1]
				return ms
			},
			removing: []string{"m-cp-1"}, healthy: true},
		{name: "a member with an alarm fails and is named with its Machine",
			change: func(s *etcd.Snapshot, ms []etcd.Machine) []etcd.Machine {
				s.Evidence[1].Alarms = []etcd.Alarm{etcd.AlarmNoSpace}
				return ms
			},
			want: "NOSPACE", wantMachine: "m-cp-1"},
		{name: "a cluster NOSPACE alarm raised by the member being removed still blocks: removal frees no space",
			change: func(s *etcd.Snapshot, ms []etcd.Machine) []etcd.Machine {
				s.Alarms = []etcd.ActiveAlarm{{MemberID: 2, Alarm: etcd.AlarmNoSpace}}
				return ms
			},
			removing: []string{"m-cp-1"}, want: "NOSPACE"},
		{name: "a CORRUPT alarm raised by the member being removed does not block its removal",
			change: func(s *etcd.Snapshot, ms []etcd.Machine) []etcd.Machine {
				s.Alarms = []etcd.ActiveAlarm{{MemberID: 2, Alarm: etcd.AlarmCorrupt}}
				s.Evidence[1].Alarms = []etcd.Alarm{etcd.AlarmCorrupt}
				return ms
			},
			removing: []string{"m-cp-1"}, healthy: true},
		{name: "a learner is not healthy",
			change: func(s *etcd.Snapshot, ms []etcd.Machine) []etcd.Machine {
				s.Members[2].IsLearner = true
				for i := range s.Evidence {
					s.Evidence[i].Members = s.Members
				}
				return ms
			},
			want: "learner", wantMachine: "m-cp-2"},
		{name: "a Machine without a Node blocks, as KCP's preflight does",
			change: func(s *etcd.Snapshot, ms []etcd.Machine) []etcd.Machine {
				return append(ms, etcd.Machine{Name: "m-new", ProviderID: "test://new"})
			},
			want: "Machine m-new", wantMachine: "m-new"},
		{name: "a Machine whose Node hosts no member blocks",
			change: func(s *etcd.Snapshot, ms []etcd.Machine) []etcd.Machine {
				return append(ms, etcd.Machine{Name: "m-cp-9", NodeName: "cp-9"})
			},
			want: "no member is hosted on Node cp-9", wantMachine: "m-cp-9"},
		{name: "a member no Machine hosts blocks",
			change: func(s *etcd.Snapshot, ms []etcd.Machine) []etcd.Machine { return ms[:2] },
			want:   "no corresponding Machine"},
		{name: "no leader blocks",
			change: func(s *etcd.Snapshot, ms []etcd.Machine) []etcd.Machine { s.LeaderID = 0; return ms },
			want:   "no leader"},
		{name: "a deleting Machine's condition does not count, its member does",
			change:  func(s *etcd.Snapshot, ms []etcd.Machine) []etcd.Machine { ms[0].Deleting = true; return ms },
			healthy: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s, machines := healthyCluster(3)
			if tt.change != nil {
				machines = tt.change(s, machines)
			}
			r := provider.Preflight(provider.Observation{Snapshot: s, Machines: machines, Now: now}, tt.removing...)
			g.Expect(r.Healthy).To(Equal(tt.healthy), r.String())
			g.Expect(r.LeftOut).To(Equal(tt.removing))
			if tt.healthy {
				g.Expect(r.Problems).To(BeEmpty())
				return
			}
			g.Expect(r.Problems).NotTo(BeEmpty())
			g.Expect(r.Problems[0].Message).To(ContainSubstring(tt.want))
			g.Expect(r.Problems[0].Machine).To(Equal(tt.wantMachine))
			g.Expect(r.String()).To(ContainSubstring(tt.want))
		})
	}
}

func TestPreflight_failedObservation(t *testing.T) {
	g := NewWithT(t)
	_, machines := healthyCluster(3)
	r := provider.Preflight(provider.Observation{Err: errors.Join(etcd.ErrUnreachable), Machines: machines, Now: now}, "m-cp-0")
	g.Expect(r.Healthy).To(BeFalse())
	g.Expect(r.String()).To(ContainSubstring("Failed to observe etcd"))
}

func TestMayScaleDownAndRemediate(t *testing.T) {
	tests := []struct {
		name      string
		broken    []int
		victim    int
		scaleDown bool
		remediate bool
	}{
		{"a healthy member of three healthy ones may go", nil, 0, true, true},
		{"a healthy member next to a broken one may not go", []int{2}, 0, false, false},
		{"the broken member of three may go", []int{2}, 2, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s, machines := healthyCluster(3)
			for _, i := range tt.broken {
				breakMember(s, i)
			}
			o := provider.Observation{Snapshot: s, Machines: machines, Now: now}
			g.Expect(provider.MayScaleDown(o, machines[tt.victim]).Allowed).To(Equal(tt.scaleDown))
			g.Expect(provider.MayRemediate(o, machines[tt.victim]).Allowed).To(Equal(tt.remediate))
		})
	}
}
