package kubeadm

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcd-adapter/etcd-adapter/internal/etcdrpc"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// answer is what asking the member on one Node gave.
type answer struct {
	node string
	at   time.Time
	// err is set when the member could not be reached at all.
	err error

	selfID    uint64
	clusterID uint64
	leaderID  uint64
	raftTerm  uint64
	status    *etcd.MemberStatus // what Status said; nil when it did not answer
	isLearner bool
	members   []etcd.Member // nil when not reported (learners, errors)
	alarms    []memberAlarm
	errors    []string // the member answered, with these errors
}

func (a answer) answered() bool { return a.err == nil }

// askAll asks every Node's member at once, at most MaxConcurrency at a time.
func (b *Backend) askAll(ctx context.Context, nodes []string, creds *credentials) map[string]answer {
	out := make(map[string]answer, len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, b.cfg.MaxConcurrency)
	for _, node := range nodes {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			a := b.ask(ctx, node, creds)
			mu.Lock()
			out[node] = a
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// ask asks the member on node for its status, member list and alarms. A kept connection that
// turns out broken is replaced once, so a stale port-forward costs one retry, not a verdict.
func (b *Backend) ask(ctx context.Context, node string, creds *credentials) answer {
	for attempt := 0; ; attempt++ {
		c, reused, err := b.pool.getReused(ctx, node, creds)
		if err != nil {
			return answer{node: node, at: time.Now(), err: err}
		}
		a := b.askClient(ctx, c, b.callTimeoutFor(reused), b.mayBeRemoved(node), b.confirmedGone)
		if a.answered() || attempt > 0 || !(reused || closedUnderneath(ctx, a.err)) {
			if !a.answered() {
				b.dropUnlessCallerEnded(ctx, node, c)
			}
			return a
		}
		b.logger(ctx).V(4).Info("Retrying etcd member on a new connection", "node", node, "err", a.err.Error())
		b.pool.drop(node, c)
	}
}

// closedUnderneath reports whether a call failed because its client was closed while it ran
// (gRPC's "the client connection is closing"), not because of the member or the caller: another
// caller found the shared connection broken and replaced it, so a new connection is worth one
// try.
func closedUnderneath(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && status.Code(err) == codes.Canceled
}

// dropUnlessCallerEnded drops the pooled client after a failed call, unless the call failed
// because the caller's own context ended (the quorum guard's observation bound, a reconcile
// cancelled): that says nothing about the connection, which another caller may be using.
func (b *Backend) dropUnlessCallerEnded(ctx context.Context, node string, c *memberClient) {
	if ctx.Err() != nil {
		return
	}
	b.pool.drop(node, c)
}

func (b *Backend) callTimeoutFor(reused bool) time.Duration {
	if reused {
		return min(b.cfg.CallTimeout, b.cfg.KeptCallTimeout)
	}
	return b.cfg.CallTimeout
}

// askClient runs Status and MemberList in parallel over one connection. A member that may have
// been removed is asked for its member list first, and for its Status only when it is in it.
//
// Note: MemberList is serializable: each member reports its own view of the membership, which
// is what the agreement check compares, and it costs the leader nothing. Whether the member is
// connected to a quorum shows in its Status (leader known, errors such as "no leader").
//
// Note: alarms come from Status, where each member lists the alarms of its own alarm store
// (replicated through raft). AlarmList is not used: etcd serves it as a raft proposal, a WAL
// write and fsync on every member, which asking every member on every reconcile would
// multiply.
func (b *Backend) askClient(ctx context.Context, c *memberClient, timeout time.Duration, mayBeRemoved bool, gone func(id uint64) bool) answer {
	if mayBeRemoved {
		return askRemovedFirst(ctx, c, timeout, gone)
	}
	var (
		wg    sync.WaitGroup
		st    *clientv3.StatusResponse
		ml    *clientv3.MemberListResponse
		stErr error
		mlErr error
	)
	wg.Go(func() { st, stErr = askStatus(ctx, c, timeout) })
	wg.Go(func() { ml, mlErr = askMemberList(ctx, c, timeout) })
	wg.Wait()
	return toAnswer(c.node, st, ml, stErr, mlErr)
}

// askRemovedFirst asks for the member list, then for Status only when the member is in its own
// list, is not one the cluster already removed (gone: a linearizable member list through
// another member showed it removed), and is in the linearizable member list asked through it
// (the leader's committed membership; the member applies everything committed before it
// answers). A removed member has not applied its own removal yet or is about to stop, so it is
// never asked for Status; it is no member of the cluster, whatever it says about itself. When
// the linearizable list cannot be had, Status is not asked either: the member may be between
// applying its removal and stopping.
//
// Note: gone is this process's memory; a manager that just started has none (another process
// may have removed the member moments before), hence the linearizable list.
//
// Important! etcd v3.6 panics ("failed to find local ID in cluster members") when a member
// that applied its own removal, and has not stopped yet, is asked for its Status: the server
// looks itself up in its member list to report IsLearner. That ends the removed member's
// process a moment early in a real cluster; in a test binary that embeds etcd it ends every
// test. So a member that may have been removed is never asked for Status first.
func askRemovedFirst(ctx context.Context, c *memberClient, timeout time.Duration, gone func(id uint64) bool) answer {
	ml, mlErr := askMemberList(ctx, c, timeout)
	if ml != nil && !slices.ContainsFunc(ml.Members, func(m *pb.Member) bool { return m.ID == ml.Header.GetMemberId() }) {
		a := toAnswer(c.node, nil, ml, errNotAsked, nil)
		a.errors = []string{fmt.Sprintf("member %x is not in its own member list: it was removed", ml.Header.GetMemberId())}
		return a
	}
	if ml != nil && gone(ml.Header.GetMemberId()) {
		return removedAnswer(c.node, ml, fmt.Sprintf("member %x was removed from the cluster and has not applied its removal yet", ml.Header.GetMemberId()))
	}
	if ml != nil {
		lin, linErr := askLinearizableMemberList(ctx, c, timeout)
		self := ml.Header.GetMemberId()
		switch {
		case linErr != nil:
			a := toAnswer(c.node, nil, ml, errNotAsked, nil)
			a.errors = []string{fmt.Sprintf("member %x may have been removed, and the cluster's linearizable member list could not be read through it: %v", self, linErr)}
			return a
		case !slices.ContainsFunc(lin.Members, func(m *pb.Member) bool { return m.ID == self }):
			return removedAnswer(c.node, ml, fmt.Sprintf("member %x is not in the cluster's linearizable member list: it was removed", self))
		}
	}
	st, stErr := askStatus(ctx, c, timeout)
	return toAnswer(c.node, st, ml, stErr, mlErr)
}

// removedAnswer is the answer of a member the cluster removed that has not applied its removal:
// it answered, but its member list is its stale view of a cluster it is no longer in, so it
// takes no part in deciding the member list. Counted, it ties with the remaining member's list
// when one member is left, and the tie can go to the stale list, which keeps the removed
// member in every snapshot.
func removedAnswer(node string, ml *clientv3.MemberListResponse, why string) answer {
	a := toAnswer(node, nil, ml, errNotAsked, nil)
	a.members = nil
	a.errors = []string{why}
	return a
}

// errNotAsked stands for a Status that was not asked.
var errNotAsked = rpctypes.ErrGRPCNotCapable

func askStatus(ctx context.Context, c *memberClient, timeout time.Duration) (*clientv3.StatusResponse, error) {
	return callWithin(ctx, timeout, "Status", func(ctx context.Context) (*clientv3.StatusResponse, error) {
		return c.maint.Status(ctx, "")
	})
}

// askLinearizableMemberList asks for the membership the leader has committed, through the member.
func askLinearizableMemberList(ctx context.Context, c *memberClient, timeout time.Duration) (*clientv3.MemberListResponse, error) {
	return callWithin(ctx, timeout, "MemberList", func(ctx context.Context) (*clientv3.MemberListResponse, error) {
		return c.cluster.MemberList(ctx)
	})
}

func askMemberList(ctx context.Context, c *memberClient, timeout time.Duration) (*clientv3.MemberListResponse, error) {
	return callWithin(ctx, timeout, "MemberList", func(ctx context.Context) (*clientv3.MemberListResponse, error) {
		return c.cluster.MemberList(ctx, clientv3.WithSerializable())
	})
}

// mayBeRemoved reports whether the member on node may have been removed: this backend sent a
// removal through or about it, the last member list has no member of that name, or this
// backend has observed nothing yet (a manager that just started does not know what the one
// before it removed).
func (b *Backend) mayBeRemoved(node string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.removedOn[node] || b.lastMembers == nil {
		return true
	}
	return !slices.ContainsFunc(b.lastMembers, func(m etcd.Member) bool { return m.Name == node })
}

// toAnswer turns the replies into an answer. The member is unreachable only when none of them
// came from etcd; a learner's rejections are facts, other etcd errors say it is listening but
// unhealthy.
func toAnswer(node string, st *clientv3.StatusResponse, ml *clientv3.MemberListResponse, stErr, mlErr error) answer {
	a := answer{node: node, at: time.Now()}
	if err := tooLarge(ml, mlErr); err != nil {
		// Nothing this member says is read any further.
		a.err = fmt.Errorf("%w: etcd on Node %s: %w", etcd.ErrTooLarge, node, err)
		return a
	}
	if stErr != nil && !etcdrpc.IsEtcdAnswer(stErr) && !etcdrpc.IsEtcdAnswer(mlErr) {
		a.err = fmt.Errorf("%w: etcd on Node %s did not answer: %w", etcd.ErrUnreachable, node, stErr)
		return a
	}
	if st != nil {
		a.selfID, a.clusterID, a.leaderID, a.isLearner = st.Header.GetMemberId(), st.Header.GetClusterId(), st.Leader, st.IsLearner
		a.raftTerm = st.RaftTerm
		a.status = &etcd.MemberStatus{DBSize: st.DbSize, DBSizeInUse: st.DbSizeInUse, DBSizeQuota: st.DbSizeQuota, RaftTerm: st.RaftTerm, RaftAppliedIndex: st.RaftAppliedIndex}
		a.errors, a.alarms = splitStatusErrors(st.Errors)
		a.errors = etcd.SanitizeTexts(a.errors, etcd.MaxErrorsPerMember, etcd.MaxTextBytes)
		a.alarms = a.alarms[:min(len(a.alarms), etcd.MaxErrorsPerMember)]
	} else {
		a.errors = append(a.errors, "Status: "+etcd.SanitizeText(stErr.Error(), etcd.MaxTextBytes))
	}
	if ml != nil {
		a.members = toMembers(ml.Members)
		if a.clusterID == 0 {
			a.clusterID, a.selfID = ml.Header.GetClusterId(), ml.Header.GetMemberId()
		}
	} else if !isLearnerRejection(mlErr) {
		a.errors = append(a.errors, "MemberList: "+etcd.SanitizeText(mlErr.Error(), etcd.MaxTextBytes))
	}
	return a
}

// memberAlarm is an active alarm and the member it is about.
type memberAlarm struct {
	memberID uint64
	alarm    etcd.Alarm
}

// statusAlarm matches the entries etcd adds to Status errors for every active alarm: the
// protobuf text of an AlarmMember, e.g. "memberID:10276657743932975437 alarm:NOSPACE ".
var statusAlarm = regexp.MustCompile(`^memberID:(\d+)\s+alarm:([A-Z]+)\s*$`)

// splitStatusErrors separates the alarms in Status errors from the member's other errors.
func splitStatusErrors(errs []string) ([]string, []memberAlarm) {
	var out []string
	var alarms []memberAlarm
	for _, e := range errs {
		m := statusAlarm.FindStringSubmatch(e)
		if m == nil {
			out = append(out, e)
			continue
		}
		id, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil {
			out = append(out, e)
			continue
		}
		alarms = append(alarms, memberAlarm{memberID: id, alarm: etcd.Alarm(m[2])})
	}
	return out, alarms
}

// tooLarge says why a member list is past the bounds (etcd.CheckMembers), or that the answer was
// past etcd.MaxResponseBytes; nil when it is not.
func tooLarge(ml *clientv3.MemberListResponse, mlErr error) error {
	if status.Code(mlErr) == codes.ResourceExhausted {
		return fmt.Errorf("the member list is larger than %d bytes", etcd.MaxResponseBytes)
	}
	if ml == nil {
		return nil
	}
	return etcd.CheckMembers(toMembers(ml.Members))
}

// toMembers translates etcd's members. NodeName is left to place, which knows the Nodes. A name
// is made one printable line (etcd.SanitizeText): it goes into status and Events, and a name
// with control characters matches no Node name either way.
func toMembers(pbs []*pb.Member) []etcd.Member {
	out := make([]etcd.Member, 0, len(pbs))
	for _, m := range pbs {
		name := m.Name
		if len(name) <= etcd.MaxMemberNameBytes {
			name = etcd.SanitizeText(name, etcd.MaxMemberNameBytes)
		}
		out = append(out, etcd.Member{
			ID: m.ID, Name: name, IsLearner: m.IsLearner,
			PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs,
		})
	}
	return out
}
