package membership

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Cluster is Observe, MoveLeader and RemoveMember of etcd.Cluster for a backend built on this
// package: the backend embeds it and sets its fields in its constructor.
type Cluster struct {
	// Memory is what the backend keeps between observations; its observation decides with it
	// (Memory.Decide).
	Memory Memory
	// Observer observes the cluster: asks every member at the places the backend knows, decides
	// with Memory, places the members and builds the snapshot. It runs for every
	// Observe and right before every change, so a change acts on what etcd says now, unless the
	// caller decided the change on the latest Observe's snapshot (etcd.ObservedChanger).
	Observer func(ctx context.Context) (*Observation, error)
	// Refuse, when set, says why no member may be removed from the observed cluster (nil
	// otherwise).
	Refuse func(o *Observation, m etcd.Member) error
	// CallTimeout bounds each call to a member.
	CallTimeout time.Duration
	// Logger is the logger of a call.
	Logger func(ctx context.Context) logr.Logger

	// last is the observation the latest Observe returned the snapshot of, for the changes a
	// caller decides on that snapshot (etcd.ObservedChanger).
	last atomic.Pointer[Observation]
}

// Observe asks every member for its status and member list, and reports what each said.
// Members that do not answer are evidence, not errors. It fails when no member of the cluster
// answered with a member list (etcd.ErrUnreachable, or the class the backend gives: for
// example etcd.ErrInvalidInput when no member accepted the credentials), and with
// etcd.ErrInvalidInput when a first observation finds two clusters in equal numbers.
func (c *Cluster) Observe(ctx context.Context) (*etcd.Snapshot, error) {
	o, err := c.Observer(ctx)
	if err != nil {
		return nil, err
	}
	c.last.Store(o)
	return o.Snap, nil
}

// observed returns the observation snap was built from when it is the latest Observe's, else a
// new one.
func (c *Cluster) observed(ctx context.Context, snap *etcd.Snapshot) (*Observation, error) {
	if o := c.last.Load(); o != nil && snap != nil && o.Snap == snap {
		return o, nil
	}
	return c.Observer(ctx)
}

// MoveLeader moves leadership off member from to member to (Changer.MoveLeader), on an
// observation made right before.
func (c *Cluster) MoveLeader(ctx context.Context, from, to etcd.Member) (etcd.LeaderMove, error) {
	return c.MoveLeaderObserved(ctx, nil, from, to)
}

// MoveLeaderObserved is MoveLeader on the observation snap was built from, when snap is the
// latest Observe's (etcd.ObservedChanger); else on a new one.
func (c *Cluster) MoveLeaderObserved(ctx context.Context, snap *etcd.Snapshot, from, to etcd.Member) (etcd.LeaderMove, error) {
	o, err := c.observed(ctx, snap)
	if err != nil {
		return etcd.LeaderMove{}, err
	}
	return c.changer(ctx).MoveLeader(ctx, o, from, to)
}

// RemoveMember removes member m by its ID (Changer.Remove), on an observation made right
// before, unless Refuse says why not. It is the caller's responsibility to check with
// etcd.CanRemoveMember that the removal keeps quorum, right before calling.
func (c *Cluster) RemoveMember(ctx context.Context, m etcd.Member) (etcd.Removal, error) {
	return c.RemoveMemberObserved(ctx, nil, m)
}

// RemoveMemberObserved is RemoveMember on the observation snap was built from, when snap is the
// latest Observe's (etcd.ObservedChanger); else on a new one. Refuse and the re-check that the
// ID is still a member run on that observation either way.
func (c *Cluster) RemoveMemberObserved(ctx context.Context, snap *etcd.Snapshot, m etcd.Member) (etcd.Removal, error) {
	o, err := c.observed(ctx, snap)
	if err != nil {
		return etcd.Removal{}, err
	}
	if c.Refuse != nil {
		if err := c.Refuse(o, m); err != nil {
			return etcd.Removal{}, err
		}
	}
	return c.changer(ctx).Remove(ctx, o, m)
}

func (c *Cluster) changer(ctx context.Context) Changer {
	return Changer{Memory: &c.Memory, CallTimeout: c.CallTimeout, Log: c.Logger(ctx)}
}
