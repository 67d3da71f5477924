package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// confirmTimeout bounds how long an alarm handle repeats its change until every running
	// member reports it, when the caller's context allows longer. Every member reports a change
	// as soon as it applied it, so this only allows for a busy machine and a leader election.
	confirmTimeout = time.Minute

	// callTimeout bounds one alarm call to one member, so that a member that stopped answering
	// does not hold the whole confirmation.
	callTimeout = 5 * time.Second
)

// AlarmsByMember asks every running voting member, each through a client of its own (never
// a balanced client, which could ask the same member twice), for the cluster's alarms, and
// returns them by member name. etcd serves AlarmList through raft (EtcdServer.Alarm in
// server/etcdserver/v3_server.go), so each answer is that member's applied state.
func (c *Cluster) AlarmsByMember(ctx context.Context) (map[string][]*pb.AlarmMember, error) {
	byMember := map[string][]*pb.AlarmMember{}
	var errs []error
	for _, m := range c.Members() {
		if !m.Running() || !m.isVoter() {
			continue
		}
		alarms, err := m.alarms(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		byMember[m.Name()] = alarms
	}
	if len(byMember) == 0 && len(errs) == 0 {
		return nil, fmt.Errorf("failed to list etcd alarms: no running member")
	}
	return byMember, errors.Join(errs...)
}

// alarms lists the cluster's alarms as this member alone answers.
func (m *Member) alarms(ctx context.Context) ([]*pb.AlarmMember, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cli, err := m.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to list etcd alarms on member %s: %w", m.Name(), err)
	}
	return resp.Alarms, nil
}

// RaiseNoSpace raises a NOSPACE alarm for the named member, exactly as etcd's own quota check
// does: clientv3 has no call for it, but the Maintenance.Alarm RPC accepts ACTIVATE, and the
// alarm goes through raft, so every member reports it in AlarmList and the cluster refuses
// writes until it is disarmed (DisarmAlarms). It returns once every running voting member,
// asked alone, reports the alarm, raising it again meanwhile (raising an active alarm changes
// nothing), or fails after confirmTimeout saying which members did not.
func (c *Cluster) RaiseNoSpace(ctx context.Context, name string) error {
	m := c.Member(name)
	if m == nil {
		return fmt.Errorf("failed to raise NOSPACE: no etcd member %s", name)
	}
	want := &pb.AlarmMember{MemberID: m.ID(), Alarm: pb.AlarmType_NOSPACE}
	raise := func(ctx context.Context, cli *clientv3.Client) error {
		_, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx, &pb.AlarmRequest{
			Action: pb.AlarmRequest_ACTIVATE, MemberID: want.MemberID, Alarm: want.Alarm,
		})
		return err
	}
	reports := func(alarms []*pb.AlarmMember) bool {
		return slices.ContainsFunc(alarms, func(a *pb.AlarmMember) bool {
			return a.MemberID == want.MemberID && a.Alarm == want.Alarm
		})
	}
	if err := c.untilEveryMember(ctx, raise, reports); err != nil {
		return fmt.Errorf("failed to raise NOSPACE for etcd member %s: %w", name, err)
	}
	return nil
}

// DisarmAlarms disarms every alarm, as `etcdctl alarm disarm` does (clientv3 AlarmDisarm with
// no member and no type disarms each listed alarm). It returns once every running voting
// member, asked alone, reports no alarm, disarming again meanwhile, or fails after
// confirmTimeout saying which members still report which alarms.
func (c *Cluster) DisarmAlarms(ctx context.Context) error {
	disarm := func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{})
		return err
	}
	none := func(alarms []*pb.AlarmMember) bool { return len(alarms) == 0 }
	if err := c.untilEveryMember(ctx, disarm, none); err != nil {
		return fmt.Errorf("failed to disarm etcd alarms: %w", err)
	}
	return nil
}

// untilEveryMember makes change through a client of the running voters until every running
// voter, asked alone, reports alarms that satisfy holds, or until confirmTimeout (or ctx)
// ends.
func (c *Cluster) untilEveryMember(ctx context.Context, change func(context.Context, *clientv3.Client) error,
	holds func([]*pb.AlarmMember) bool,
) error {
	ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	var last error
	for {
		if last = c.changeOnce(ctx, change); last == nil {
			last = c.everyMemberHolds(ctx, holds)
			if last == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(last, context.Cause(ctx))
		case <-time.After(retryInterval):
		}
	}
}

// changeOnce makes change through a client of the running voters.
func (c *Cluster) changeOnce(ctx context.Context, change func(context.Context, *clientv3.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cli, err := c.NewClient(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	return change(ctx, cli)
}

// everyMemberHolds fails naming the members whose alarms do not satisfy holds, with their
// alarms, or that did not answer.
func (c *Cluster) everyMemberHolds(ctx context.Context, holds func([]*pb.AlarmMember) bool) error {
	byMember, err := c.AlarmsByMember(ctx)
	if err != nil {
		return err
	}
	var not []string
	for _, name := range slices.Sorted(maps.Keys(byMember)) {
		if !holds(byMember[name]) {
			not = append(not, fmt.Sprintf("%s reports %v", name, byMember[name]))
		}
	}
	if len(not) > 0 {
		return fmt.Errorf("not yet on every member: %s", strings.Join(not, "; "))
	}
	return nil
}
