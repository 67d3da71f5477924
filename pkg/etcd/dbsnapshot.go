package etcd

import (
	"context"
	"io"
)

// DatabaseSnapshotter is implemented by backends that stream a member's database themselves
// (kubeadm and external, through the connection they already keep). K3s and RKE2 take their own
// snapshots and do not implement it.
type DatabaseSnapshotter interface {
	// SnapshotDatabase opens a snapshot stream of one member's database, a healthy follower's
	// when there is one (to spare the leader), on an observation made right before. The caller
	// must close Body.
	SnapshotDatabase(ctx context.Context) (*DatabaseSnapshot, error)
}

// DatabaseSnapshot is an open snapshot stream of one member's database.
type DatabaseSnapshot struct {
	// Member is the member the snapshot comes from.
	Member Member
	// RevisionBefore is the member's revision read right before the stream was opened: the
	// snapshot holds at least this revision.
	RevisionBefore int64
	// Version is the storage version the member reported (etcd v3.6 and later), for restore.
	Version string
	// Body is the database, then the sha256 of the database that etcd appends (etcd
	// server/etcdserver/api/v3rpc/maintenance.go Snapshot).
	Body io.ReadCloser
}
