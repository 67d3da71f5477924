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

	// RemoveMemberResponses is keyed by Node name; a Node without an entry reports RemovalRemoved.
	RemoveMemberResponses map[string]etcd.Removal
	RemoveMemberError     error

	// MovedLeader records every MoveLeader call as [fromNode, toNode].
	MovedLeader [][2]string
	// RemovedMembers records every RemoveMember call's Node name.
	RemovedMembers []string
}

// Observe returns ObserveResponse and ObserveError.
func (c *Cluster) Observe(context.Context) (*etcd.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ObserveResponse, c.ObserveError
}

// MoveLeader records the call and returns MoveLeaderResponse and MoveLeaderError.
func (c *Cluster) MoveLeader(_ context.Context, fromNode, toNode string) (etcd.LeaderMove, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.MovedLeader = append(c.MovedLeader, [2]string{fromNode, toNode})
	return c.MoveLeaderResponse, c.MoveLeaderError
}

// RemoveMember records the call and returns the scripted removal for the Node.
func (c *Cluster) RemoveMember(_ context.Context, nodeName string) (etcd.Removal, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.RemovedMembers = append(c.RemovedMembers, nodeName)
	if r, ok := c.RemoveMemberResponses[nodeName]; ok {
		return r, c.RemoveMemberError
	}
	return etcd.Removal{State: etcd.RemovalRemoved}, c.RemoveMemberError
}
