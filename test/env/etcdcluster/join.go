package etcdcluster

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// AddLearner adds a member as a learner (MemberAddAsLearner) and starts it, as kubeadm join
// and a restarted K3s server do, and waits until it serves clients. It fails while another
// learner exists (etcd allows one). While etcd refuses the change as unhealthy (strict
// reconfiguration check, see Options.DisableStrictReconfigCheck) it retries until ctx ends.
func (c *Cluster) AddLearner(ctx context.Context, spec MemberSpec) (*Member, error) {
	spec = spec.withDefaults()
	if c.Member(spec.MemberName) != nil {
		return nil, fmt.Errorf("failed to add etcd learner %s: name in use", spec.MemberName)
	}
	m, err := newMember(c.settings, spec)
	if err != nil {
		return nil, err
	}
	return m, c.startAsLearner(ctx, m, spec.MemberName)
}

// AddLearnerNotStarted adds a member as a learner (MemberAddAsLearner) and does not start it:
// until StartLearner, etcd lists it with its peer URL and no name, as it lists the learner that
// kubeadm join added while the etcd static Pod has not started yet (its image is being pulled).
// The member is among Members at once, not running, with the ID etcd gave it.
func (c *Cluster) AddLearnerNotStarted(ctx context.Context, spec MemberSpec) (*Member, error) {
	spec = spec.withDefaults()
	if c.Member(spec.MemberName) != nil {
		return nil, fmt.Errorf("failed to add etcd learner %s: name in use", spec.MemberName)
	}
	m, err := newMember(c.settings, spec)
	if err != nil {
		return nil, err
	}
	return m, c.addAsLearner(ctx, m, spec.MemberName)
}

// StartLearner starts a learner that AddLearnerNotStarted added, as its static Pod starts, and
// returns once it serves clients. It fails when etcd no longer lists the learner (the etcd
// server then refuses the member list it was added with).
func (c *Cluster) StartLearner(ctx context.Context, m *Member) error {
	if err := m.start(); err != nil {
		return err
	}
	return m.waitReady(ctx)
}

// startAsLearner adds m to the cluster as a learner, as `kubeadm join` does, starts it under
// name and returns once it serves clients.
func (c *Cluster) startAsLearner(ctx context.Context, m *Member, name string) error {
	if err := c.addAsLearner(ctx, m, name); err != nil {
		return err
	}
	return c.StartLearner(ctx, m)
}

// addAsLearner adds m to the cluster as a learner to be started under name.
func (c *Cluster) addAsLearner(ctx context.Context, m *Member, name string) error {
	resp, err := c.memberAddAsLearner(ctx, m.PeerURL())
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.initialCluster = joinInitialCluster(resp, name)
	m.clusterState = embed.ClusterStateFlagExisting
	m.id = resp.Member.ID
	m.mu.Unlock()
	c.mu.Lock()
	c.members = append(c.members, m)
	c.mu.Unlock()
	return nil
}

// JoinLearner adds and starts a learner named name listening on ip; the Node name is the
// member name. It is AddLearner in the shape the K3s simulator consumes.
func (c *Cluster) JoinLearner(ctx context.Context, name, ip string) error {
	_, err := c.AddLearner(ctx, MemberSpec{NodeName: name, IP: ip})
	return err
}

// joinInitialCluster renders --initial-cluster for a joining member from the member list
// etcd returned when it was added, as etcdctl member add does. etcd checks that the peer URLs
// match its member list exactly, so unstarted members (empty name, e.g. a ghost learner) are
// listed too, under a placeholder name, as is another member that carries the joining name.
func joinInitialCluster(resp *clientv3.MemberAddResponse, name string) string {
	var parts []string
	for _, m := range resp.Members {
		n := m.Name
		if m.ID == resp.Member.ID {
			n = name
		}
		if n == "" || (n == name && m.ID != resp.Member.ID) {
			// etcd groups --initial-cluster entries by name: another member of the same name
			// (a reused hostname) must not merge with the joining one.
			n = fmt.Sprintf("member-%x", m.ID)
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, n+"="+u)
		}
	}
	return strings.Join(parts, ",")
}

// PromoteMember promotes the named learner to a voter, retrying while etcd reports that the
// learner is not in sync yet, until ctx ends.
func (c *Cluster) PromoteMember(ctx context.Context, name string) error {
	m := c.Member(name)
	if m == nil {
		return fmt.Errorf("failed to promote etcd member %s: no such member", name)
	}
	return c.promote(ctx, m)
}

// promote promotes learner m, retrying while etcd reports that it is not in sync yet.
func (c *Cluster) promote(ctx context.Context, m *Member) error {
	name := m.Name()
	cli, err := c.NewClient(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	err = retryWhile(ctx, isLearnerNotReady, func() error {
		_, err := cli.MemberPromote(ctx, m.ID())
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to promote etcd member %s: %w", name, err)
	}
	return nil
}
