package fake

import (
	"context"
	"sync"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

var _ etcd.Cluster = &Cluster{}

// Cluster is a scripted etcd.Cluster. Each method returns its Response/Error pair and records the
// call.
type Cluster struct {
	mu sync.Mutex

	ObserveResponse *etcd.Snapshot
	ObserveError    error

	MoveLeaderResponse etcd.LeaderMove
	MoveLeaderError    error

	// RemoveMemberResponses is keyed by member ID; a member without an entry reports
	// RemovalRemoved.
	RemoveMemberResponses map[uint64]etcd.Removal
	RemoveMemberError     error

	// MovedLeader records every MoveLeader call as [from, to].
	MovedLeader [][2]etcd.Member
	// RemovedMembers records every RemoveMember call's member.
	RemovedMembers []etcd.Member

	// ApplyChanges makes the scripted cluster change as etcd would: a RemoveMember that reports
	// RemovalRemoved takes the member out of ObserveResponse (its member list, its evidence and
	// every other member's list, and the leader when it led), and a MoveLeader that reports
	// LeaderMoved makes the target the leader, so the next Observe shows the change. Off, the
	// next Observe returns ObserveResponse unchanged.
	ApplyChanges bool
	// Maintenance scripts Defragment and DisarmAlarms.
	Maintenance
}

// Observe returns ObserveResponse and ObserveError.
func (c *Cluster) Observe(context.Context) (*etcd.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ObserveResponse, c.ObserveError
}

// MoveLeader records the call and returns MoveLeaderResponse and MoveLeaderError.
func (c *Cluster) MoveLeader(_ context.Context, from, to etcd.Member) (etcd.LeaderMove, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.MovedLeader = append(c.MovedLeader, [2]etcd.Member{from, to})
	if c.ApplyChanges && c.MoveLeaderError == nil && c.MoveLeaderResponse.Outcome == etcd.LeaderMoved && c.ObserveResponse != nil {
		c.ObserveResponse = withLeader(c.ObserveResponse, to.ID)
	}
	return c.MoveLeaderResponse, c.MoveLeaderError
}

// RemoveMember records the call and returns the scripted removal for the member.
func (c *Cluster) RemoveMember(_ context.Context, m etcd.Member) (etcd.Removal, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.RemovedMembers = append(c.RemovedMembers, m)
	r, ok := c.RemoveMemberResponses[m.ID]
	if !ok {
		r = etcd.Removal{State: etcd.RemovalRemoved, Member: m}
	}
	if c.ApplyChanges && c.RemoveMemberError == nil && r.State == etcd.RemovalRemoved && c.ObserveResponse != nil {
		c.ObserveResponse = without(c.ObserveResponse, m.ID)
	}
	return r, c.RemoveMemberError
}
