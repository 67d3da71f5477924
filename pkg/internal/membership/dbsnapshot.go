package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// SnapshotClient is a Client that can also stream its member's database. The clients of
// NewClient are; a backend's own client type implements it over the same connection.
type SnapshotClient interface {
	Client
	// SnapshotWithVersion opens the member's snapshot stream (clientv3 Maintenance).
	SnapshotWithVersion(ctx context.Context) (*clientv3.SnapshotResponse, error)
}

// SnapshotWithVersion opens the member's snapshot stream.
func (c *etcdClient) SnapshotWithVersion(ctx context.Context) (*clientv3.SnapshotResponse, error) {
	return c.maint.SnapshotWithVersion(ctx)
}

// SnapshotDatabase opens a snapshot stream of one member's database on an observation made right
// before: a follower that answered with its status, in order of place, and the leader only when
// no follower could be streamed from. The member's revision is read through the same connection
// right before the stream is opened. The stream's lifetime is ctx's: give it a deadline long
// enough for the database, not a call timeout.
func (c *Cluster) SnapshotDatabase(ctx context.Context) (*etcd.DatabaseSnapshot, error) {
	o, err := c.Observer(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range SnapshotSources(o) {
		s, err := c.snapshotFrom(ctx, o, a)
		if err == nil {
			return s, nil
		}
		c.Logger(ctx).V(2).Info("etcd member could not be snapshotted, trying the next", "where", a.Where, "err", err.Error())
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w: no etcd member answered with its status, so none can be snapshotted", etcd.ErrUnreachable)
	}
	return nil, fmt.Errorf("failed to open an etcd snapshot stream on any member: %w", errors.Join(errs...))
}

// SnapshotSources are the answers of voting members of the observed cluster that answered with
// their status and have raised no alarm, followers first (to spare the leader, which carries the
// cluster's writes), each group in order of place.
func SnapshotSources(o *Observation) []Answer {
	var followers, leaders []Answer
	for _, a := range o.Answers {
		m, ok := o.Snap.MemberByID(a.SelfID)
		switch {
		case !a.Answered(), a.Status == nil, a.Removed != "", !o.Decision.OfCluster(a), !ok, m.IsLearner, raisedBy(a):
			continue
		case a.LeaderID == a.SelfID:
			leaders = append(leaders, a)
		default:
			followers = append(followers, a)
		}
	}
	byPlace := func(x, y Answer) int { return strings.Compare(x.Where, y.Where) }
	slices.SortFunc(followers, byPlace)
	slices.SortFunc(leaders, byPlace)
	return append(followers, leaders...)
}

func (c *Cluster) snapshotFrom(ctx context.Context, o *Observation, a Answer) (*etcd.DatabaseSnapshot, error) {
	cl, err := o.Transport.Reach(ctx, a.Where)
	if err != nil {
		return nil, fmt.Errorf("failed to reach etcd at %s: %w", a.Where, err)
	}
	sc, ok := cl.(SnapshotClient)
	if !ok {
		return nil, fmt.Errorf("%w: the connection to etcd at %s cannot stream snapshots", etcd.ErrInvalidInput, a.Where)
	}
	st, err := Call(ctx, c.CallTimeout, "Status", sc.Status)
	if err != nil {
		return nil, o.Transport.Describe(ctx, a.Where, "Status", err)
	}
	if st.Header == nil || st.Header.MemberId != a.SelfID {
		return nil, fmt.Errorf("%w: etcd at %s answers as another member than the one observed", etcd.ErrUnreachable, a.Where)
	}
	resp, err := sc.SnapshotWithVersion(ctx)
	if err != nil {
		return nil, o.Transport.Describe(ctx, a.Where, "Snapshot", err)
	}
	m, _ := o.Snap.MemberByID(a.SelfID)
	return &etcd.DatabaseSnapshot{Member: m, RevisionBefore: st.Header.Revision, Version: resp.Version, Body: resp.Snapshot}, nil
}

// raisedBy reports whether the member that answered a raised an alarm (a NOSPACE or CORRUPT
// member's database is not the one to keep).
func raisedBy(a Answer) bool {
	return slices.ContainsFunc(a.Alarms, func(al etcd.ActiveAlarm) bool { return al.MemberID == a.SelfID })
}
