package etcd

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzVerdicts feeds arbitrary snapshots to every verdict function. It checks that none panics
// and that the verdicts agree with each other: a removal is never safe when healthy voters are
// not already a majority, a member not healthy never gets a True condition, and every condition
// carries a reason from the API.
func FuzzVerdicts(f *testing.F) {
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{2, 0xff, 0x10, 0x20, 0x30, 0x40})
	f.Add([]byte{7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28})
	f.Add([]byte{1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, machines := snapshotFromBytes(data)
		v := AssessHealth(HealthInput{Snapshot: s, Machines: machines, Now: testNow})
		checkConditions(t, v)
		for _, mh := range v.Members {
			checkRemoval(t, s, v.Members, mh)
		}
		for _, m := range machines {
			_ = CanRemediate(s, testNow, m)
			_ = LeaderCandidates(v.Members, machines, Member{NodeName: m.NodeName})
		}
	})
}

func checkConditions(t *testing.T, v HealthVerdict) {
	valid := map[string]bool{
		MemberHealthyReason: true, MemberNotHealthyReason: true, MemberInspectionFailedReason: true,
		MemberConnectionDownReason: true, MemberDeletingReason: true,
		ClusterHealthUnknownReason: true,
	}
	for name, c := range v.Machines {
		if !valid[c.Reason] {
			t.Fatalf("Machine %s: condition reason %q is not an API reason", name, c.Reason)
		}
	}
	if !valid[v.Cluster.Reason] {
		t.Fatalf("cluster condition reason %q is not an API reason", v.Cluster.Reason)
	}
	for _, mh := range v.Members {
		if mh.Health == Healthy || mh.Member.NodeName == "" {
			continue
		}
		for name, c := range v.Machines {
			if c.Status == metav1.ConditionTrue && mh.Member.NodeName == nodeOfMachine(name) {
				t.Fatalf("Machine %s is True while its member is %s: %s", name, mh.Health, mh.Message)
			}
		}
	}
}

func checkRemoval(t *testing.T, s *Snapshot, ms []MemberHealth, target MemberHealth) {
	verdict := ProjectRemoval(ms, target.Member.ID)
	c := countQuorum(ms)
	if verdict.Allowed && 2*c.healthyVoters <= c.voters {
		t.Fatalf("removal of %s allowed while quorum is lost (%s)", target.Member, c)
	}
	if verdict.Allowed && len(ms) == 1 {
		t.Fatalf("removal of the last member %s allowed", target.Member)
	}
	if verdict.Allowed != bruteForceRemovalSafe(ms, indexOf(ms, target.Member.ID)) {
		t.Fatalf("ProjectRemoval disagrees with brute force for %s", describe(ms))
	}
	if byMember := CanRemoveMember(s, testNow, target.Member); byMember.Allowed != verdict.Allowed {
		t.Fatalf("CanRemoveMember and ProjectRemoval disagree for %s", target.Member)
	}
	if target.Member.NodeName != "" {
		if byNode := CanRemoveNode(s, testNow, target.Member.NodeName); byNode.Allowed && !verdict.Allowed {
			t.Fatalf("CanRemoveNode allows what ProjectRemoval refuses for %s", target.Member)
		}
	}
}

func indexOf(ms []MemberHealth, id uint64) int {
	for i, m := range ms {
		if m.Member.ID == id {
			return i
		}
	}
	return -1
}

// nodeOfMachine inverts the naming snapshotFromBytes uses (Machine "m-<node>").
func nodeOfMachine(name string) string { return name[2:] }

// snapshotFromBytes decodes arbitrary bytes into a snapshot with up to 7 members and Machines.
// Every byte choice is legal, so the fuzzer explores shapes rather than parse errors.
func snapshotFromBytes(data []byte) (*Snapshot, []Machine) {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	n := int(next() % 8)
	s := &Snapshot{Backend: "fuzz", ObservedAt: testNow, LeaderID: uint64(next() % 9)}
	var machines []Machine
	for i := range n {
		b := next()
		m := Member{ID: uint64(i + 1), Name: node(i), NodeName: node(i), IsLearner: b&1 != 0}
		if b&2 != 0 {
			m.Name = ""
		}
		if b&4 != 0 {
			m.NodeName = ""
		}
		s.Members = append(s.Members, m)
		if b&8 == 0 {
			machines = append(machines, Machine{Name: "m-" + node(i), NodeName: node(i), Deleting: b&16 != 0, Created: testNow.Add(-time.Duration(b) * time.Minute)})
		}
	}
	for _, m := range s.Members {
		s.Evidence = append(s.Evidence, evidenceFromByte(m, s.Members, next()))
	}
	if next()&1 != 0 {
		s.BlindSpots = []BlindSpot{BlindSpotGhostMembers, BlindSpotLeader}
	}
	return s, machines
}

func evidenceFromByte(m Member, all []Member, b byte) MemberEvidence {
	ev := MemberEvidence{MemberID: m.ID, NodeName: m.NodeName, ObservedAt: testNow, ClusterID: 1 + uint64(b>>6), LeaderID: uint64(b>>4) % 3}
	switch b & 3 {
	case 0:
		ev.Contact = ContactAnswered
	case 1:
		ev.Contact, ev.Error = ContactUnreachable, "refused"
	case 2:
		ev.Contact, ev.Error = ContactUnknown, "no condition"
	case 3:
		ev.Contact = ContactAnswered
		ev.ObservedAt = testNow.Add(-time.Hour)
	}
	if b&4 != 0 {
		ev.Alarms = []Alarm{AlarmNoSpace}
	}
	if b&8 == 0 {
		ev.Members = all[:len(all)-int(b>>5)%2*min(1, len(all))]
	}
	if b&32 != 0 && b&64 != 0 {
		ev.Errors = []string{fmt.Sprintf("status error %d", b)}
	}
	return ev
}
