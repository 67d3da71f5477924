package etcd

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestLeaderCandidates(t *testing.T) {
	base := testNow.Add(-24 * time.Hour)
	tests := []struct {
		name     string
		members  []MemberHealth
		machines []Machine
		leaving  string
		want     []string
	}{
		{
			name:    "healthy members come before unhealthy ones",
			members: members("Vh", "Vu", "Vh"),
			machines: []Machine{
				{Name: "a", NodeName: "cp-0", Created: base}, {Name: "b", NodeName: "cp-1", Created: base.Add(time.Hour)},
				{Name: "c", NodeName: "cp-2", Created: base},
			},
			leaving: "cp-0",
			want:    []string{"cp-2", "cp-1"},
		},
		{
			name:    "then Machines whose health checks pass",
			members: members("Vh", "Vh", "Vh"),
			machines: []Machine{
				{Name: "a", NodeName: "cp-0"}, {Name: "b", NodeName: "cp-1", Created: base.Add(time.Hour)},
				{Name: "c", NodeName: "cp-2", HealthCheckSucceeded: true, Created: base},
			},
			leaving: "cp-0",
			want:    []string{"cp-2", "cp-1"},
		},
		{
			name:    "then up-to-date Machines",
			members: members("Vh", "Vh", "Vh"),
			machines: []Machine{
				{Name: "a", NodeName: "cp-0"}, {Name: "b", NodeName: "cp-1", HealthCheckSucceeded: true, Created: base.Add(time.Hour)},
				{Name: "c", NodeName: "cp-2", HealthCheckSucceeded: true, UpToDate: true, Created: base},
			},
			leaving: "cp-0",
			want:    []string{"cp-2", "cp-1"},
		},
		{
			name:    "then the newest Machine",
			members: members("Vh", "Vh", "Vh"),
			machines: []Machine{
				{Name: "a", NodeName: "cp-0"}, {Name: "b", NodeName: "cp-1", Created: base},
				{Name: "c", NodeName: "cp-2", Created: base.Add(time.Hour)},
			},
			leaving: "cp-0",
			want:    []string{"cp-2", "cp-1"},
		},
		{
			name:     "learners, never-started members and deleting Machines are no candidates",
			members:  append(members("Vh", "Lh", "Vh", "Vh"), MemberHealth{Member: Member{ID: 99}, Health: Unhealthy}),
			machines: append(machines(3), Machine{Name: "m-cp-3", NodeName: "cp-3", Deleting: true}),
			leaving:  "cp-0",
			want:     []string{"cp-2"},
		},
		{
			name:     "no candidate when the leaving member is alone",
			members:  members("Vh"),
			machines: machines(1),
			leaving:  "cp-0",
			want:     []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			leaving, ok := findOnNode(tt.members, tt.leaving)
			g.Expect(ok).To(BeTrue(), "the leaving member is one of the members")
			nodes := []string{}
			for _, m := range LeaderCandidates(tt.members, tt.machines, leaving) {
				nodes = append(nodes, m.NodeName)
			}
			g.Expect(nodes).To(Equal(tt.want))
		})
	}
}

func findOnNode(members []MemberHealth, node string) (Member, bool) {
	for _, mh := range members {
		if mh.Member.NodeName == node {
			return mh.Member, true
		}
	}
	return Member{}, false
}
