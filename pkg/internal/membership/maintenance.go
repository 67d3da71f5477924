package membership

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-adapter/etcd-adapter/internal/etcdrpc"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Maintainer is the maintenance API of one member's connection. A Client made by NewClient
// implements it; a backend's own Client does when it can defragment.
type Maintainer interface {
	// Defragment defragments the database of the member behind the connection, and of no other.
	Defragment(ctx context.Context) error
	// AlarmDisarm disarms the alarm of the given type raised for the member with the given ID.
	AlarmDisarm(ctx context.Context, memberID uint64, alarm etcd.Alarm) error
}

var _ Maintainer = &etcdClient{}

// Defragment calls Maintenance.Defragment on the client's endpoint (clientv3 dials it alone, so
// only that member is defragmented), or on the one connection maint is bound to.
func (c *etcdClient) Defragment(ctx context.Context) error {
	_, err := c.maint.Defragment(ctx, c.endpoint)
	return err
}

// AlarmDisarm calls Maintenance.AlarmDisarm; etcd commits it through raft, so any member of the
// cluster takes it.
func (c *etcdClient) AlarmDisarm(ctx context.Context, memberID uint64, alarm etcd.Alarm) error {
	t, ok := pb.AlarmType_value[string(alarm)]
	if !ok || alarm == "NONE" {
		return fmt.Errorf("%w: unknown etcd alarm %q", etcd.ErrInvalidInput, alarm)
	}
	_, err := c.maint.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: memberID, Alarm: pb.AlarmType(t)})
	return err
}

// Defragment defragments member m through its own connection, once safe accepts the observation
// made right before (the caller's safety re-check on what etcd says now: a nil error lets it
// go). The call is bounded by ctx alone: a defragmentation takes as long as copying the database
// does, far longer than CallTimeout. The member's Status right after gives its sizes after;
// they are nil when it does not answer then.
func (c *Cluster) Defragment(ctx context.Context, m etcd.Member, safe func(*etcd.Snapshot) error) (etcd.Defragmentation, error) {
	o, err := c.Observer(ctx)
	if err != nil {
		return etcd.Defragmentation{}, err
	}
	if err := safe(o.Snap); err != nil {
		return etcd.Defragmentation{}, err
	}
	a, ok := o.AnswerOf(m.ID)
	if !ok || a.Status == nil {
		return etcd.Defragmentation{}, fmt.Errorf("%w: etcd member %s did not answer with its status right before its defragmentation", etcd.ErrUnreachable, m)
	}
	cl, mc, err := c.maintainerAt(ctx, o, a.Where)
	if err != nil {
		return etcd.Defragmentation{}, err
	}
	d := etcd.Defragmentation{Member: m, Before: *a.Status, Start: time.Now()}
	err = mc.Defragment(ctx)
	d.Took = time.Since(d.Start)
	if err != nil {
		return d, c.maintenanceError(ctx, o, a.Where, cl, "Defragment", err)
	}
	c.Logger(ctx).Info("Defragmented etcd member", "member", m.String(), "took", d.Took.String())
	if st, err := Call(ctx, c.CallTimeout, "Status", cl.Status); err == nil {
		d.After = statusOf(st)
	}
	return d, nil
}

// DisarmAlarms disarms each alarm, once safe accepts the observation made right before, through
// the first member in the observation's RequestOrder (the leader first) that takes it.
func (c *Cluster) DisarmAlarms(ctx context.Context, alarms []etcd.ActiveAlarm, safe func(*etcd.Snapshot) error) error {
	o, err := c.Observer(ctx)
	if err != nil {
		return err
	}
	if err := safe(o.Snap); err != nil {
		return err
	}
	var errs []error
	for _, via := range o.RequestOrder(0) {
		cl, mc, err := c.maintainerAt(ctx, o, via)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := c.disarmVia(ctx, o, via, cl, mc, alarms); err != nil {
			errs = append(errs, err)
			continue
		}
		return nil
	}
	if len(errs) == 0 {
		return fmt.Errorf("%w: no voting member of etcd answered, so no alarm could be disarmed", etcd.ErrUnreachable)
	}
	return errors.Join(errs...)
}

func (c *Cluster) disarmVia(ctx context.Context, o *Observation, via string, cl Client, mc Maintainer, alarms []etcd.ActiveAlarm) error {
	for _, al := range alarms {
		_, err := Call(ctx, c.CallTimeout, "AlarmDisarm", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, mc.AlarmDisarm(ctx, al.MemberID, al.Alarm)
		})
		if err != nil {
			return c.maintenanceError(ctx, o, via, cl, "AlarmDisarm", err)
		}
		c.Logger(ctx).Info("Disarmed etcd alarm", "alarm", string(al.Alarm), "memberID", fmt.Sprintf("%x", al.MemberID), "via", via)
	}
	return nil
}

func (c *Cluster) maintainerAt(ctx context.Context, o *Observation, where string) (Client, Maintainer, error) {
	cl, err := o.Transport.Reach(ctx, where)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to reach etcd at %s: %w", where, err)
	}
	mc, ok := cl.(Maintainer)
	if !ok {
		return nil, nil, fmt.Errorf("%w: the connection to etcd at %s has no maintenance API", etcd.ErrInvalidInput, where)
	}
	return cl, mc, nil
}

// maintenanceError classifies a failed maintenance call as the other changes do.
func (c *Cluster) maintenanceError(ctx context.Context, o *Observation, where string, cl Client, what string, err error) error {
	if etcdrpc.IsEtcdAnswer(err) {
		return fmt.Errorf("%w: etcd at %s refused %s: %w", etcd.ErrRefused, where, what, o.Transport.Describe(ctx, where, what, err))
	}
	o.Transport.Lost(ctx, where, cl)
	return fmt.Errorf("failed to call %s on etcd at %s: %w", what, where, o.Transport.Describe(ctx, where, what, err))
}

// statusOf is the part of a StatusResponse the snapshot keeps.
func statusOf(st *clientv3.StatusResponse) *etcd.MemberStatus {
	return &etcd.MemberStatus{DBSize: st.DbSize, DBSizeInUse: st.DbSizeInUse, DBSizeQuota: st.DbSizeQuota, RaftTerm: st.RaftTerm, RaftAppliedIndex: st.RaftAppliedIndex}
}
