package k3ssim

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdCluster is what the simulator needs from the etcd cluster under test. It is owned by the
// simulator (the consumer) and kept minimal; the test environment adapts its etcd cluster to it.
type EtcdCluster interface {
	// NewClient returns a new client, closed by the caller, with the cluster's TLS settings, for
	// the given client URLs, or for every member's client URL when none are given.
	NewClient(ctx context.Context, endpoints ...string) (*clientv3.Client, error)
	// StopMember stops the etcd server of the named member and keeps its data. It is what K3s
	// does to its own etcd after its member was removed (tombstone). Stopping a member that is
	// not running is not an error.
	StopMember(ctx context.Context, name string) error
	// JoinLearner adds a learner whose peer URL is on ip (MemberAddAsLearner) and starts its
	// etcd under the member name name, as a restarted K3s server does. It returns once the
	// member's etcd has started. etcd allows one learner at a time, so it fails while another
	// learner exists.
	JoinLearner(ctx context.Context, name, ip string) error
}

// member is the simulator's own view of an etcd member (translated at the edge, so no
// protobuf type leaks into the decision code).
type member struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
}

// hasPeerHost reports whether one of the member's peer URLs has host address; K3s matches a
// member by name AND peer URL host (k3s pkg/etcd/member_controller.go).
func (m member) hasPeerHost(address string) bool {
	for _, peer := range m.PeerURLs {
		if u, err := url.Parse(peer); err == nil && u.Hostname() == address {
			return true
		}
	}
	return false
}

// memberFromPB translates a protobuf member.
func memberFromPB(m *etcdserverpb.Member) member {
	return member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner}
}

// errNoOtherVoter is the leader-aware (1.34.2+) rejection when the member to remove is the
// leader and no other voter can take over (k3s pkg/etcd/member_controller.go).
var errNoOtherVoter = errors.New("cannot move etcd leadership: no other voting member")

// isRejection reports whether a removal error is the rejection K3s clears remove for (PR 8392): etcd's
// "not enough started members", or the leader-aware rejection, which K3s treats the same way
// because etcd itself would refuse to remove the only voter with that error.
func isRejection(err error) bool {
	return errors.Is(err, rpctypes.ErrMemberNotEnoughStarted) || errors.Is(err, errNoOtherVoter) ||
		strings.Contains(err.Error(), rpctypes.ErrMemberNotEnoughStarted.Error())
}

// etcdOps are the etcd RPCs the simulator issues, each with its own deadline.
type etcdOps struct {
	cluster EtcdCluster
	cli     *clientv3.Client
	timeout time.Duration

	mu sync.Mutex
	// renames maps etcd's member name to the name a cluster reset gave it (ClusterReset).
	renames map[string]string
}

// rename makes the member etcd calls from known as to from now on.
func (o *etcdOps) rename(from, to string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.renames == nil {
		o.renames = map[string]string{}
	}
	for etcdName, shown := range o.renames {
		if shown == from {
			from = etcdName
		}
	}
	o.renames[from] = to
}

// shownName is the name the simulator shows for etcd's member name.
func (o *etcdOps) shownName(etcdName string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n, ok := o.renames[etcdName]; ok {
		return n
	}
	return etcdName
}

// etcdName is etcd's own name of a member the simulator shows as shown.
func (o *etcdOps) etcdName(shown string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for etcdName, n := range o.renames {
		if n == shown {
			return etcdName
		}
	}
	return shown
}

// members lists the members and points the client at the voters' client URLs, because
// learners reject most RPCs.
func (o *etcdOps) members(ctx context.Context) ([]member, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	resp, err := o.cli.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to list etcd members: %w", err)
	}
	members := make([]member, 0, len(resp.Members))
	var voterURLs []string
	for _, m := range resp.Members {
		shown := memberFromPB(m)
		shown.Name = o.shownName(m.Name)
		members = append(members, shown)
		if !m.IsLearner {
			voterURLs = append(voterURLs, m.ClientURLs...)
		}
	}
	if len(voterURLs) > 0 {
		o.cli.SetEndpoints(voterURLs...)
	}
	return members, nil
}

// status asks one member for its status; that is K3s's health check (k3s pkg/etcd/etcd.go:
// Status(member.ClientURLs[0]) from the leader).
func (o *etcdOps) status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	return o.cli.Status(ctx, endpoint)
}

// leaderID returns the raft leader's member ID, asking the voters in turn.
func (o *etcdOps) leaderID(ctx context.Context, members []member) (uint64, error) {
	var errs []error
	for _, m := range members {
		if m.IsLearner || len(m.ClientURLs) == 0 {
			continue
		}
		resp, err := o.status(ctx, m.ClientURLs[0])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if resp.Leader != 0 {
			return resp.Leader, nil
		}
	}
	return 0, fmt.Errorf("failed to find the etcd leader: %w", errors.Join(errs...))
}

// moveLeader moves leadership from leader to the member transferee. The request must be
// made to the leader, so it goes through a client for the leader's client URL only.
func (o *etcdOps) moveLeader(ctx context.Context, leader member, transferee uint64) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cli, err := o.cluster.NewClient(ctx, leader.ClientURLs...)
	if err != nil {
		return fmt.Errorf("failed to create etcd client for leader %s: %w", leader.Name, err)
	}
	defer func() { _ = cli.Close() }()
	if _, err := cli.MoveLeader(ctx, transferee); err != nil {
		return fmt.Errorf("failed to move etcd leadership from %s to %x: %w", leader.Name, transferee, err)
	}
	return nil
}

// removeMember removes a member; a member that is already gone counts as removed.
func (o *etcdOps) removeMember(ctx context.Context, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if _, err := o.cli.MemberRemove(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrMemberNotFound) {
		return fmt.Errorf("failed to remove etcd member %x: %w", id, err)
	}
	return nil
}

// promoteMember promotes a learner to a voter.
func (o *etcdOps) promoteMember(ctx context.Context, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if _, err := o.cli.MemberPromote(ctx, id); err != nil {
		return fmt.Errorf("failed to promote etcd learner %x: %w", id, err)
	}
	return nil
}
