package etcdcluster

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// AddGhostLearner adds a learner whose peer URL nobody listens on, as a failed join leaves
// behind (KCP issues 13221/13667): it has an empty name and never starts. etcd allows one
// learner at a time, so AddLearner fails until the ghost is removed. It returns the ghost's
// member ID and peer URL. Like AddLearner, it retries while etcd refuses the change as unhealthy.
func (c *Cluster) AddGhostLearner(ctx context.Context) (uint64, string, error) {
	return c.AddGhostLearnerOn(ctx, DefaultIP)
}

// AddGhostLearnerOn is AddGhostLearner with the peer URL on ip, the address of the Node whose
// join failed (kubeadm join advertises the Node's address).
func (c *Cluster) AddGhostLearnerOn(ctx context.Context, ip string) (uint64, string, error) {
	port, err := ports.allocate(ip)
	if err != nil {
		return 0, "", err
	}
	u := httpsURL(ip, port)
	peerURL := u.String()
	resp, err := c.memberAddAsLearner(ctx, peerURL)
	if err != nil {
		return 0, "", err
	}
	return resp.Member.ID, peerURL, nil
}

// memberAddAsLearner adds a learner with the given peer URL through the running voters.
func (c *Cluster) memberAddAsLearner(ctx context.Context, peerURL string) (*clientv3.MemberAddResponse, error) {
	cli, err := c.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cli.Close() }()
	var resp *clientv3.MemberAddResponse
	err = retryWhile(ctx, isUnhealthy, func() (err error) {
		resp, err = cli.MemberAddAsLearner(ctx, []string{peerURL})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to add etcd learner %s: %w", peerURL, err)
	}
	return resp, nil
}

// StartSeparate starts a separate single-member cluster, with its own cluster ID but the same
// CA, whose member is named after nodeName: the target of a split brain, where a Node's etcd
// Pod answers from another cluster. Clients of this cluster's CA and client certificate are
// accepted by it. Close also closes it.
func (c *Cluster) StartSeparate(ctx context.Context, nodeName string) (*Cluster, error) {
	s, err := Start(ctx, Options{
		Members:    []MemberSpec{{NodeName: nodeName}},
		CA:         c.settings.ca,
		TickMs:     c.settings.tickMs,
		ElectionMs: c.settings.electionMs,
		Binary:     c.settings.binary,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to start separate etcd cluster: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.separates = append(c.separates, s)
	return s, nil
}
