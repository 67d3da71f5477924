package membership

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// AskAll asks every place at once, at most limit at a time (no limit when limit is zero),
// and returns the answers sorted by place.
func AskAll(ctx context.Context, places []string, limit int, askAt func(ctx context.Context, where string) Answer) []Answer {
	out := make([]Answer, len(places))
	if limit <= 0 {
		limit = max(len(places), 1)
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, where := range places {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = askAt(ctx, where)
		})
	}
	wg.Wait()
	slices.SortStableFunc(out, func(x, y Answer) int { return strings.Compare(x.Where, y.Where) })
	return out
}

// Asking is how one member is asked.
type Asking struct {
	// Timeout bounds each call.
	Timeout time.Duration
	// MayBeRemoved says the member at this place may have been removed (the backend asked
	// for its removal, its place is in no member list seen last, or nothing was seen yet).
	MayBeRemoved bool
	// Gone reports the members a linearizable member list showed removed.
	Gone func(id uint64) bool
}

// AskMember asks the member behind c, at where, for its member list and Status, in parallel; a
// member that may have been removed is asked for its member list first (see askRemovedFirst).
// The member is unreachable (Answer.Err) only when no reply came from etcd; a learner's
// rejection is a fact, other etcd errors say it listens but is unhealthy.
//
// Note: MemberList is serializable: each member reports its own view of the membership, which
// is what the agreement check compares, and it costs the leader nothing. Whether the member is
// connected to a quorum shows in its Status (leader known, errors such as "no leader").
//
// Note: alarms come from Status, where each member lists the alarms of its own alarm store
// (replicated through raft). AlarmList is not used: etcd serves it as a raft proposal, a WAL
// write and fsync on every member, which asking every member on every observation would
// multiply.
func AskMember(ctx context.Context, t Transport, c Client, where string, how Asking) Answer {
	if how.MayBeRemoved {
		return askRemovedFirst(ctx, t, c, where, how)
	}
	var (
		wg           sync.WaitGroup
		st           *clientv3.StatusResponse
		ml           *clientv3.MemberListResponse
		stErr, mlErr error
	)
	wg.Go(func() { st, stErr = Call(ctx, how.Timeout, "Status", c.Status) })
	wg.Go(func() { ml, mlErr = memberList(ctx, c, how.Timeout, false) })
	wg.Wait()
	return toAnswer(ctx, t, where, st, ml, stErr, mlErr)
}

// askRemovedFirst asks for the member list, then for Status only when the member is in its own
// list, is not one the cluster already removed (Gone: a linearizable member list through
// another member showed it removed), and is in the linearizable member list asked through it
// (the leader's committed membership; the member applies everything committed before it
// answers). A removed member has not applied its own removal yet or is about to stop, so it is
// never asked for Status; it is no member of the cluster, whatever it says about itself. When
// the linearizable list cannot be had, Status is not asked either: the member may be between
// applying its removal and stopping; its own member list still counts, so a cluster without
// quorum can be observed by a backend that just started.
//
// Note: Gone is this process's memory; a manager that just started has none (another process
// may have removed the member moments before), hence the linearizable list.
//
// Important! etcd v3.6 panics ("failed to find local ID in cluster members") when a member
// that applied its own removal, and has not stopped yet, is asked for its Status: the server
// looks itself up in its member list to report IsLearner. That ends the removed member's
// process a moment early in a real cluster; in a test binary that embeds etcd it ends every
// test. So a member that may have been removed is never asked for Status first.
func askRemovedFirst(ctx context.Context, t Transport, c Client, where string, how Asking) Answer {
	ml, mlErr := memberList(ctx, c, how.Timeout, false)
	if tooLarge(ml, mlErr) != nil {
		return toAnswer(ctx, t, where, nil, ml, errNotAsked, mlErr)
	}
	if ml == nil {
		// A learner, or a member that did not answer its member list: it lists nothing, so it
		// cannot be told removed; etcd serves a learner's Status.
		st, stErr := Call(ctx, how.Timeout, "Status", c.Status)
		return toAnswer(ctx, t, where, st, nil, stErr, mlErr)
	}
	answeringID := ml.Header.GetMemberId()
	isAnswering := func(m *pb.Member) bool { return m.ID == answeringID }
	switch {
	case !slices.ContainsFunc(ml.Members, isAnswering):
		return removedAnswer(where, ml, fmt.Sprintf("member %x is not in its own member list: it was removed", answeringID))
	case how.Gone != nil && how.Gone(answeringID):
		return removedAnswer(where, ml, fmt.Sprintf("member %x was removed from the cluster and has not applied its removal yet", answeringID))
	}
	lin, linErr := memberList(ctx, c, how.Timeout, true)
	switch {
	case linErr != nil:
		a := toAnswer(ctx, t, where, nil, ml, errNotAsked, nil)
		a.Errors = []string{fmt.Sprintf("member %x may have been removed, and the cluster's linearizable member list could not be read through it: %s",
			answeringID, etcd.SanitizeText(t.Describe(ctx, where, "MemberList", linErr).Error(), etcd.MaxTextBytes))}
		return a
	case !slices.ContainsFunc(lin.Members, isAnswering):
		return removedAnswer(where, ml, fmt.Sprintf("member %x is not in the cluster's linearizable member list: it was removed", answeringID))
	}
	st, stErr := Call(ctx, how.Timeout, "Status", c.Status)
	return toAnswer(ctx, t, where, st, ml, stErr, mlErr)
}

// errNotAsked stands for a Status that was not asked: an etcd answer, so the member counts as
// answering.
var errNotAsked = rpctypes.ErrGRPCNotCapable

// removedAnswer is the answer of a member the cluster removed that has not applied its removal:
// it answered, but its member list is its stale view of a cluster it is no longer in, so it
// takes no part in deciding the cluster. Counted, it ties with the remaining member's list when
// one member is left, and the tie can go to the stale list, which keeps the removed member in
// every snapshot.
func removedAnswer(where string, ml *clientv3.MemberListResponse, why string) Answer {
	return Answer{Where: where, At: time.Now(), SelfID: ml.Header.GetMemberId(), ClusterID: ml.Header.GetClusterId(),
		Removed: why, Errors: []string{why}}
}

func memberList(ctx context.Context, c Client, timeout time.Duration, linearizable bool) (*clientv3.MemberListResponse, error) {
	return Call(ctx, timeout, "MemberList", func(ctx context.Context) (*clientv3.MemberListResponse, error) {
		return c.MemberList(ctx, linearizable)
	})
}

// toAnswer turns the replies into an answer.
func toAnswer(ctx context.Context, t Transport, where string, st *clientv3.StatusResponse, ml *clientv3.MemberListResponse, stErr, mlErr error) Answer {
	a := Answer{Where: where, At: time.Now()}
	if err := tooLarge(ml, mlErr); err != nil {
		// Nothing this member says is read any further.
		a.Err = t.Describe(ctx, where, "MemberList", fmt.Errorf("%w: %w", etcd.ErrTooLarge, err))
		return a
	}
	if st == nil && ml == nil && !etcdrpc.IsEtcdAnswer(stErr) && !etcdrpc.IsEtcdAnswer(mlErr) {
		a.Err = t.Describe(ctx, where, "Status", stErr)
		return a
	}
	if st != nil {
		a.SelfID, a.ClusterID, a.LeaderID, a.RaftTerm = st.Header.GetMemberId(), st.Header.GetClusterId(), st.Leader, st.RaftTerm
		a.Status = statusOf(st)
		errs, alarms := SplitStatusErrors(st.Errors)
		a.Errors = etcd.SanitizeTexts(errs, etcd.MaxErrorsPerMember, etcd.MaxTextBytes)
		a.Alarms = alarms[:min(len(alarms), etcd.MaxErrorsPerMember)]
	} else if stErr != errNotAsked { //nolint:errorlint // identity on purpose: errors.Is on a gRPC status compares by value and would also match a real "not capable" answer
		a.Errors = append(a.Errors, etcd.SanitizeText(t.Describe(ctx, where, "Status", stErr).Error(), etcd.MaxTextBytes))
	}
	if ml != nil {
		a.Members = ToMembers(ml.Members)
		if a.ClusterID == 0 {
			a.ClusterID, a.SelfID = ml.Header.GetClusterId(), ml.Header.GetMemberId()
		}
	} else if !isLearnerRejection(mlErr) {
		a.Errors = append(a.Errors, etcd.SanitizeText(t.Describe(ctx, where, "MemberList", mlErr).Error(), etcd.MaxTextBytes))
	}
	return a
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
	return etcd.CheckMembers(ToMembers(ml.Members))
}
