package fake

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func TestCluster_recordsCallsAndReturnsScriptedAnswers(t *testing.T) {
	g := NewWithT(t)
	cp0 := etcd.Member{ID: 10, Name: "cp-0", NodeName: "cp-0"}
	cp1 := etcd.Member{ID: 11, Name: "cp-1", NodeName: "cp-1"}
	cp2 := etcd.Member{ID: 12, Name: "cp-2", NodeName: "cp-2"}
	c := &Cluster{RemoveMemberResponses: map[uint64]etcd.Removal{cp1.ID: {State: etcd.RemovalRejected, Reason: "too few started members"}}}

	r, err := c.RemoveMember(context.Background(), cp1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.State).To(Equal(etcd.RemovalRejected))
	r, _ = c.RemoveMember(context.Background(), cp2)
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved))
	g.Expect(r.Member).To(Equal(cp2))
	_, _ = c.MoveLeader(context.Background(), cp0, cp2)

	g.Expect(c.RemovedMembers).To(Equal([]etcd.Member{cp1, cp2}))
	g.Expect(c.MovedLeader).To(Equal([][2]etcd.Member{{cp0, cp2}}))
}

func TestCluster_applyChanges(t *testing.T) {
	cp0 := etcd.Member{ID: 10, Name: "cp-0", NodeName: "cp-0"}
	cp1 := etcd.Member{ID: 11, Name: "cp-1", NodeName: "cp-1"}
	members := []etcd.Member{cp0, cp1}
	snapshot := &etcd.Snapshot{Members: members, LeaderID: cp1.ID, Evidence: []etcd.MemberEvidence{
		{MemberID: cp0.ID, Contact: etcd.ContactAnswered, Members: members, LeaderID: cp1.ID},
		{MemberID: cp1.ID, Contact: etcd.ContactAnswered, Members: members, LeaderID: cp1.ID},
	}}
	tests := []struct {
		name         string
		apply        bool
		removal      etcd.RemovalState
		wantMembers  []etcd.Member
		wantLeader   uint64
		wantEvidence int
	}{
		{"without ApplyChanges the next Observe is unchanged", false, etcd.RemovalRemoved, members, cp0.ID, 2},
		{"a leader move and a removal that reports Removed show in the next Observe", true, etcd.RemovalRemoved, []etcd.Member{cp0}, cp0.ID, 1},
		{"a rejected removal changes nothing", true, etcd.RemovalRejected, members, cp0.ID, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := &Cluster{ObserveResponse: snapshot, ApplyChanges: tt.apply, MoveLeaderResponse: etcd.LeaderMove{Outcome: etcd.LeaderMoved},
				RemoveMemberResponses: map[uint64]etcd.Removal{cp1.ID: {State: tt.removal}}}
			_, _ = c.MoveLeader(context.Background(), cp1, cp0)
			_, _ = c.RemoveMember(context.Background(), cp1)
			got, err := c.Observe(context.Background())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Members).To(Equal(tt.wantMembers))
			g.Expect(got.Evidence).To(HaveLen(tt.wantEvidence))
			if tt.apply {
				g.Expect(got.LeaderID).To(Equal(tt.wantLeader))
				g.Expect(got.Evidence[0].Members).To(Equal(tt.wantMembers))
			}
			g.Expect(snapshot.Members).To(Equal(members), "the caller's snapshot is left as it was")
		})
	}
}
