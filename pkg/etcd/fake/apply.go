package fake

import (
	"slices"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// without returns a copy of s with the member gone, as etcd's member lists show it after a
// MemberRemove: the caller's snapshot is left as it was, since tests keep it to compare against.
func without(s *etcd.Snapshot, id uint64) *etcd.Snapshot {
	out := *s
	gone := func(m etcd.Member) bool { return m.ID == id }
	out.Members = slices.DeleteFunc(slices.Clone(s.Members), gone)
	out.Evidence = nil
	for _, ev := range s.Evidence {
		if ev.MemberID == id {
			continue
		}
		if ev.Members != nil {
			ev.Members = slices.DeleteFunc(slices.Clone(ev.Members), gone)
		}
		if ev.LeaderID == id {
			ev.LeaderID = 0
		}
		out.Evidence = append(out.Evidence, ev)
	}
	if out.LeaderID == id {
		// Note: etcd elects a new leader after its leader leaves; until then none is known.
		out.LeaderID = 0
	}
	return &out
}

// withLeader returns a copy of s in which the member with the given ID leads, for the snapshot
// and every member that answered.
func withLeader(s *etcd.Snapshot, id uint64) *etcd.Snapshot {
	out := *s
	out.LeaderID = id
	out.Evidence = slices.Clone(s.Evidence)
	for i := range out.Evidence {
		if out.Evidence[i].Contact == etcd.ContactAnswered {
			out.Evidence[i].LeaderID = id
		}
	}
	return &out
}
