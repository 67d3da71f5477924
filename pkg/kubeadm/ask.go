package kubeadm

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

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
	isLearner bool
	members   []etcd.Member // nil when not reported (learners, errors)
	alarms    []*pb.AlarmMember
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
		c, err := b.pool.get(ctx, node, creds)
		if err != nil {
			return answer{node: node, at: time.Now(), err: err}
		}
		a := b.askClient(ctx, c)
		if a.answered() || attempt > 0 {
			if !a.answered() {
				b.pool.drop(node, c)
			}
			return a
		}
		b.logger(ctx).V(4).Info("Retrying etcd member on a new connection", "node", node, "err", a.err.Error())
		b.pool.drop(node, c)
	}
}

// askClient runs Status, MemberList and AlarmList in parallel over one connection.
func (b *Backend) askClient(ctx context.Context, c *memberClient) answer {
	var (
		wg       sync.WaitGroup
		st       *clientv3.StatusResponse
		ml       *clientv3.MemberListResponse
		al       *clientv3.AlarmResponse
		stErr    error
		mlErr    error
		alarmErr error
	)
	wg.Go(func() {
		st, stErr = call(ctx, b, "Status", func(ctx context.Context) (*clientv3.StatusResponse, error) {
			return c.maint.Status(ctx, "")
		})
	})
	wg.Go(func() {
		ml, mlErr = call(ctx, b, "MemberList", func(ctx context.Context) (*clientv3.MemberListResponse, error) {
			return c.cluster.MemberList(ctx)
		})
	})
	wg.Go(func() {
		al, alarmErr = call(ctx, b, "AlarmList", func(ctx context.Context) (*clientv3.AlarmResponse, error) {
			return c.maint.AlarmList(ctx)
		})
	})
	wg.Wait()
	return toAnswer(c.node, st, ml, al, stErr, mlErr, alarmErr)
}

// toAnswer turns the three replies into an answer. The member is unreachable only when none
// of them came from etcd; a learner's rejections are facts, other etcd errors say it is
// listening but unhealthy.
func toAnswer(node string, st *clientv3.StatusResponse, ml *clientv3.MemberListResponse, al *clientv3.AlarmResponse, stErr, mlErr, alarmErr error) answer {
	a := answer{node: node, at: time.Now()}
	if stErr != nil && !isEtcdAnswer(stErr) && !isEtcdAnswer(mlErr) && !isEtcdAnswer(alarmErr) {
		a.err = fmt.Errorf("%w: etcd on Node %s did not answer: %w", etcd.ErrUnreachable, node, stErr)
		return a
	}
	if st != nil {
		a.selfID, a.clusterID, a.leaderID, a.isLearner = st.Header.GetMemberId(), st.Header.GetClusterId(), st.Leader, st.IsLearner
		a.errors = append(a.errors, statusErrors(st.Errors)...)
	} else {
		a.errors = append(a.errors, "Status: "+stErr.Error())
	}
	if ml != nil {
		a.members = toMembers(ml.Members)
		if a.clusterID == 0 {
			a.clusterID, a.selfID = ml.Header.GetClusterId(), ml.Header.GetMemberId()
		}
	} else if !isLearnerRejection(mlErr) {
		a.errors = append(a.errors, "MemberList: "+mlErr.Error())
	}
	if al != nil {
		a.alarms = al.Alarms
	} else if !isLearnerRejection(alarmErr) {
		a.errors = append(a.errors, "AlarmList: "+alarmErr.Error())
	}
	return a
}

// statusErrors drops the alarm entries etcd copies into Status errors ("memberID:... alarm:...")
// for every member: alarms are reported per member from AlarmList instead.
func statusErrors(errs []string) []string {
	var out []string
	for _, e := range errs {
		if !strings.HasPrefix(e, "memberID:") {
			out = append(out, e)
		}
	}
	return out
}

// toMembers translates etcd's members. The Node is the member name (kubeadm names members
// after their Node); a member that never started has no name and so no Node.
func toMembers(pbs []*pb.Member) []etcd.Member {
	out := make([]etcd.Member, 0, len(pbs))
	for _, m := range pbs {
		out = append(out, etcd.Member{
			ID: m.ID, Name: m.Name, NodeName: m.Name, IsLearner: m.IsLearner,
			PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs,
		})
	}
	return out
}
