package etcd

import "time"

var testNow = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

const testClusterID = 0xc1

// cluster builds a snapshot of n started voters on Nodes cp-0..cp-n-1 (member i has ID i+1),
// each answering with the same member list, cluster ID and leader (member 1), observed now.
func cluster(n int) *Snapshot {
	s := &Snapshot{Backend: "test", ObservedAt: testNow, LeaderID: 1}
	for i := range n {
		s.Members = append(s.Members, Member{ID: uint64(i + 1), Name: node(i), NodeName: node(i)})
	}
	for _, m := range s.Members {
		s.Evidence = append(s.Evidence, MemberEvidence{
			MemberID: m.ID, NodeName: m.NodeName, Contact: ContactAnswered, ObservedAt: testNow,
			ClusterID: testClusterID, Members: cloneMembers(s.Members), LeaderID: 1,
		})
	}
	return s
}

func node(i int) string { return "cp-" + string(rune('0'+i)) }

func cloneMembers(ms []Member) []Member { return append([]Member(nil), ms...) }

// machines returns one healthy, up-to-date Machine per Node cp-0..cp-n-1.
func machines(n int) []Machine {
	var out []Machine
	for i := range n {
		out = append(out, Machine{Name: "m-" + node(i), NodeName: node(i), HealthCheckSucceeded: true, UpToDate: true,
			Created: testNow.Add(-time.Duration(n-i) * time.Hour)})
	}
	return out
}

// with applies edits to a snapshot and returns it, so table entries stay one expression.
func with(s *Snapshot, edits ...func(*Snapshot)) *Snapshot {
	for _, e := range edits {
		e(s)
	}
	return s
}

func evidence(id uint64, edit func(*MemberEvidence)) func(*Snapshot) {
	return func(s *Snapshot) {
		for i := range s.Evidence {
			if s.Evidence[i].MemberID == id {
				edit(&s.Evidence[i])
			}
		}
	}
}

// learner turns member id into a learner everywhere it is listed.
func learner(id uint64) func(*Snapshot) {
	return func(s *Snapshot) {
		mark := func(ms []Member) {
			for i := range ms {
				if ms[i].ID == id {
					ms[i].IsLearner = true
				}
			}
		}
		mark(s.Members)
		for i := range s.Evidence {
			mark(s.Evidence[i].Members)
		}
	}
}

// addMember adds m to the cluster's list and to every member's reported list, without evidence.
func addMember(m Member) func(*Snapshot) {
	return func(s *Snapshot) {
		s.Members = append(s.Members, m)
		for i := range s.Evidence {
			s.Evidence[i].Members = append(s.Evidence[i].Members, m)
		}
	}
}

// sharedName gives member 3 (cp-2) a peer URL and adds member 9, which carries the same name
// with another peer URL and never answers: a reused hostname whose old member was not removed.
func sharedName(s *Snapshot) {
	for i := range s.Members {
		if s.Members[i].ID == 3 {
			s.Members[i].PeerURLs = []string{"https://10.0.0.3:2380"}
		}
	}
	addMember(Member{ID: 9, Name: "cp-2", NodeName: "cp-2", PeerURLs: []string{"https://10.0.0.9:2380"}})(s)
}
