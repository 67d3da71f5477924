package etcd

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestAssessMembers(t *testing.T) {
	tests := []struct {
		name        string
		snapshot    *Snapshot
		member      uint64
		wantHealth  Health
		wantMessage string
	}{
		{
			name:       "a member that answers with the majority's view is healthy",
			snapshot:   cluster(3),
			member:     2,
			wantHealth: Healthy,
		},
		{
			name:       "a healthy learner is healthy: voting is judged elsewhere",
			snapshot:   with(cluster(3), learner(3)),
			member:     3,
			wantHealth: Healthy,
		},
		{
			name:        "a member that never started (no name) is unhealthy",
			snapshot:    with(cluster(3), addMember(Member{ID: 0xab, PeerURLs: []string{"https://10.0.0.9:2380"}, IsLearner: true})),
			member:      0xab,
			wantHealth:  Unhealthy,
			wantMessage: "etcd member ab was added but never started",
		},
		{
			name:        "a started member on no Node cannot be asked: unknown, not healthy",
			snapshot:    with(cluster(3), addMember(Member{ID: 9, Name: "ghost"})),
			member:      9,
			wantHealth:  Unknown,
			wantMessage: "etcd member ghost is hosted on no Node, so it could not be asked",
		},
		{
			name:        "a member that does not answer is unhealthy, with the error",
			snapshot:    with(cluster(3), evidence(2, unreachable("dial tcp 127.0.0.1:2379: connection refused"))),
			member:      2,
			wantHealth:  Unhealthy,
			wantMessage: "etcd member cp-1 is not answering: dial tcp 127.0.0.1:2379: connection refused",
		},
		{
			name:        "a member that is listening but reports errors is unhealthy, with its errors",
			snapshot:    with(cluster(3), evidence(2, func(e *MemberEvidence) { e.Errors = []string{"raft: stopped"} })),
			member:      2,
			wantHealth:  Unhealthy,
			wantMessage: "etcd member cp-1 is listening but unhealthy: raft: stopped",
		},
		{
			name:        "NOSPACE makes a member unhealthy",
			snapshot:    with(cluster(3), evidence(1, alarms(AlarmNoSpace))),
			member:      1,
			wantHealth:  Unhealthy,
			wantMessage: "etcd member cp-0 reports alarms: NOSPACE",
		},
		{
			name:        "CORRUPT makes a member unhealthy, alarms listed once and sorted",
			snapshot:    with(cluster(3), evidence(3, alarms(AlarmNoSpace, AlarmCorrupt, AlarmNoSpace))),
			member:      3,
			wantHealth:  Unhealthy,
			wantMessage: "etcd member cp-2 reports alarms: CORRUPT, NOSPACE",
		},
		{
			name:        "a member reporting another cluster ID is split from the majority",
			snapshot:    with(cluster(3), evidence(3, func(e *MemberEvidence) { e.ClusterID = 0xbad })),
			member:      3,
			wantHealth:  Unhealthy,
			wantMessage: "etcd member cp-2 reports cluster ID bad while the majority reports c1 (split brain)",
		},
		{
			name:       "the majority stays healthy when one member is split",
			snapshot:   with(cluster(3), evidence(3, func(e *MemberEvidence) { e.ClusterID = 0xbad })),
			member:     1,
			wantHealth: Healthy,
		},
		{
			name:        "with no majority cluster ID every member is suspect",
			snapshot:    with(cluster(2), evidence(2, func(e *MemberEvidence) { e.ClusterID = 0xbad })),
			member:      1,
			wantHealth:  Unhealthy,
			wantMessage: "etcd member cp-0 reports cluster ID c1 and no cluster ID has a majority (split brain)",
		},
		{
			name:        "a member whose member list differs from the majority's is unhealthy",
			snapshot:    with(cluster(3), evidence(2, func(e *MemberEvidence) { e.Members = e.Members[:2] })),
			member:      2,
			wantHealth:  Unhealthy,
			wantMessage: "etcd member cp-1 reports members [cp-0, cp-1], which differs from the majority's [cp-0, cp-1, cp-2]",
		},
		{
			name:        "a member that knows no leader is unhealthy",
			snapshot:    with(cluster(3), evidence(1, func(e *MemberEvidence) { e.LeaderID = 0 })),
			member:      1,
			wantHealth:  Unhealthy,
			wantMessage: "etcd member cp-0 knows no leader",
		},
		{
			name:        "evidence older than the default TTL is unknown, never healthy",
			snapshot:    with(cluster(3), evidence(1, func(e *MemberEvidence) { e.ObservedAt = testNow.Add(-3 * time.Minute) })),
			member:      1,
			wantHealth:  Unknown,
			wantMessage: "the last evidence about etcd member cp-0 is 3m0s old, older than the 2m0s it can be trusted",
		},
		{
			name: "a backend's longer TTL is honoured",
			snapshot: with(cluster(3), evidence(1, func(e *MemberEvidence) { e.ObservedAt = testNow.Add(-3 * time.Minute) }),
				func(s *Snapshot) { s.EvidenceTTL = 6 * time.Minute }),
			member:     1,
			wantHealth: Healthy,
		},
		{
			name: "evidence the backend marks unknown stays unknown with its reason",
			snapshot: with(cluster(3), evidence(2, func(e *MemberEvidence) {
				e.Contact, e.Error = ContactUnknown, "K3s v1.26.5+k3s1 does not write EtcdIsVoter"
			})),
			member:      2,
			wantHealth:  Unknown,
			wantMessage: "the health of etcd member cp-1 is unknown: K3s v1.26.5+k3s1 does not write EtcdIsVoter",
		},
		{
			name:       "evidence without member lists or cluster IDs (K3s) is judged on what it has",
			snapshot:   with(cluster(3), withoutLists),
			member:     2,
			wantHealth: Healthy,
		},
		{
			name:        "a member with no evidence at all is unknown",
			snapshot:    with(cluster(3), func(s *Snapshot) { s.Evidence = s.Evidence[:2] }),
			member:      3,
			wantHealth:  Unknown,
			wantMessage: "etcd member cp-2 was not asked",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mh, ok := findMember(AssessMembers(tt.snapshot, testNow), tt.member)
			g.Expect(ok).To(BeTrue())
			g.Expect(mh.Health).To(Equal(tt.wantHealth))
			g.Expect(mh.Message).To(Equal(tt.wantMessage))
		})
	}
}

// TestAssessMembers_noSpace: a member is marked NoSpace only when a NOSPACE alarm is all that is
// wrong with it, since only then does it still vote.
func TestAssessMembers_noSpace(t *testing.T) {
	tests := []struct {
		name     string
		snapshot *Snapshot
		want     bool
	}{
		{name: "its own NOSPACE alarm", snapshot: with(cluster(3), evidence(1, alarms(AlarmNoSpace))), want: true},
		{name: "the cluster's NOSPACE alarm naming it", snapshot: with(cluster(3), func(s *Snapshot) {
			s.Alarms = []ActiveAlarm{{MemberID: 1, Alarm: AlarmNoSpace}}
		}), want: true},
		{name: "NOSPACE and CORRUPT", snapshot: with(cluster(3), evidence(1, alarms(AlarmNoSpace, AlarmCorrupt)))},
		{name: "NOSPACE on a member that knows no leader", snapshot: with(cluster(3), evidence(1, alarms(AlarmNoSpace)), evidence(1, func(e *MemberEvidence) { e.LeaderID = 0 }))},
		{name: "NOSPACE on a member split from the majority", snapshot: with(cluster(3), evidence(1, alarms(AlarmNoSpace)), evidence(1, func(e *MemberEvidence) { e.ClusterID = 0xbad }))},
		{name: "a healthy member", snapshot: cluster(3)},
		{name: "a member that does not answer while another has NOSPACE", snapshot: with(cluster(3), evidence(1, unreachable("connection refused")), evidence(2, alarms(AlarmNoSpace)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mh, ok := findMember(AssessMembers(tt.snapshot, testNow), 1)
			g.Expect(ok).To(BeTrue())
			g.Expect(mh.NoSpace).To(Equal(tt.want), mh.Message)
			if tt.want {
				g.Expect(mh.Health).To(Equal(Unhealthy))
			}
		})
	}
}

func unreachable(msg string) func(*MemberEvidence) {
	return func(e *MemberEvidence) {
		*e = MemberEvidence{MemberID: e.MemberID, NodeName: e.NodeName, Contact: ContactUnreachable, Error: msg, ObservedAt: e.ObservedAt}
	}
}

func alarms(as ...Alarm) func(*MemberEvidence) {
	return func(e *MemberEvidence) { e.Alarms = as }
}

func TestAssessMembers_sharedName(t *testing.T) {
	g := NewWithT(t)
	ms := AssessMembers(with(cluster(3), sharedName), testNow)
	live, stale := ms[2], ms[3]
	g.Expect(live.Member.ID).To(Equal(uint64(3)))
	g.Expect(live.Health).To(Equal(Healthy), "the member that answered for itself is healthy: %s", live.Message)
	g.Expect(stale.Member.ID).To(Equal(uint64(9)))
	g.Expect(stale.Health).NotTo(Equal(Healthy), "the stale member has no evidence of its own")
	want := "etcd members 3 (peer URLs https://10.0.0.3:2380) and 9 (peer URLs https://10.0.0.9:2380) share the name cp-2: remove the one that is not running by its ID"
	g.Expect(live.Problems).To(ConsistOf(want))
	g.Expect(stale.Problems).To(ConsistOf(want))
	for _, other := range ms[:2] {
		g.Expect(other.Problems).To(BeEmpty())
	}
	// The problem does not distort the quorum projection: the stale member can go, and so could
	// the live one (3 of 4 voters answer); the controller removes the stale one by its ID.
	g.Expect(ProjectRemoval(ms, 9).Allowed).To(BeTrue())
	// Deleting the Machine on cp-2 removes both: the stale one first, then the live one.
	v := CanRemoveNode(with(cluster(3), sharedName), testNow, "cp-2")
	g.Expect(v.Allowed).To(BeTrue(), v.Message)
	g.Expect(v.Message).To(Equal("removing etcd member cp-2 keeps quorum: after it 3 of 3 voters are healthy; then removing etcd member cp-2 keeps quorum: after it 2 of 2 voters are healthy"))
}

// withoutLists strips what a Node-condition backend cannot report.
func withoutLists(s *Snapshot) {
	for i := range s.Evidence {
		s.Evidence[i].Members, s.Evidence[i].ClusterID, s.Evidence[i].LeaderID = nil, 0, 0
	}
	s.LeaderID = 0
	s.BlindSpots = []BlindSpot{BlindSpotGhostMembers, BlindSpotMemberLists, BlindSpotClusterID, BlindSpotAlarms, BlindSpotLeader}
}

func TestAssessMembers_sharedNameSyntheticIDs(t *testing.T) {
	g := NewWithT(t)
	s := with(cluster(3), sharedName)
	s.SyntheticMemberIDs = true
	ms := AssessMembers(s, testNow)
	want := "2 etcd members on Node cp-2 share the name cp-2"
	g.Expect(ms[2].Problems).To(ConsistOf(want), "members whose IDs are not etcd's are told apart by their Nodes, never by those IDs")
	g.Expect(ms[3].Problems).To(ConsistOf(want))
}

func TestSnapshot_EtcdMemberID(t *testing.T) {
	tests := []struct {
		name      string
		synthetic bool
		id        uint64
		want      string
	}{
		{name: "An ID etcd assigned is shown as etcd shows it, in hexadecimal", id: 0x8e9e05c52164694d, want: "8e9e05c52164694d"},
		{name: "An ID the backend made up is never shown", synthetic: true, id: 0x1b57f0c2aa9d3e41, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := &Snapshot{SyntheticMemberIDs: tt.synthetic}
			g.Expect(s.EtcdMemberID(tt.id)).To(Equal(tt.want))
		})
	}
}
