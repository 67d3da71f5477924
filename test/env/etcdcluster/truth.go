package etcdcluster

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The ground truth tests compare etcd-adapter's view with: who leads and which members the
// cluster has, as etcd itself says, not as the code under test observed it.

// ErrNoLeader is returned by Leader while no running member knows a running leader: an
// election is under way, or quorum is lost.
var ErrNoLeader = errors.New("no running member knows a running leader")

// Leader returns the running member that leads, as the running members' raft state says. It
// reads the embedded servers in process, so it holds while a member's network is cut or its
// client port refuses connections; members run as processes of their own (Options.Binary) are
// asked for their Status instead. Callers that expect an election wrap it in Eventually.
func (c *Cluster) Leader() (*Member, error) {
	members := c.Members()
	for _, m := range members {
		if !m.Running() {
			continue
		}
		lead := m.leaderID()
		if lead == 0 {
			continue
		}
		for _, l := range members {
			if l.Running() && l.ID() == lead {
				return l, nil
			}
		}
	}
	return nil, ErrNoLeader
}

// MemberList is the cluster's member list, asked linearizably (clientv3's default) through the
// running voting members, so it is the list after every committed change.
func (c *Cluster) MemberList(ctx context.Context) ([]*pb.Member, error) {
	cli, err := c.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	return listAndClose(ctx, cli)
}

// MemberList is the member list as this member answers it alone. A member removed from the
// cluster that still runs answers with its last view, or not at all; ask the Cluster for the
// committed list.
func (m *Member) MemberList(ctx context.Context) ([]*pb.Member, error) {
	cli, err := m.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	return listAndClose(ctx, cli)
}

// listAndClose asks cli for the member list and closes it.
func listAndClose(ctx context.Context, cli *clientv3.Client) ([]*pb.Member, error) {
	resp, err := cli.MemberList(ctx)
	if closeErr := cli.Close(); err == nil && closeErr != nil {
		err = closeErr
	}
	if err != nil {
		return nil, fmt.Errorf("failed to list etcd members: %w", err)
	}
	return resp.Members, nil
}

// Version is the etcd version the running voters report in their Status (e.g. "3.5.35"), as
// etcd itself says; an error when they report different ones.
func (c *Cluster) Version(ctx context.Context) (string, error) {
	var versions []string
	for _, m := range c.Members() {
		if !m.Running() || !m.isVoter() {
			continue
		}
		_, v, err := m.status(ctx)
		if err != nil {
			return "", fmt.Errorf("failed to read the etcd version of member %s: %w", m.Name(), err)
		}
		if len(versions) > 0 && versions[0] != v {
			return "", fmt.Errorf("etcd members run different versions: %s and %s", versions[0], v)
		}
		versions = append(versions, v)
	}
	if len(versions) == 0 {
		return "", fmt.Errorf("failed to read the etcd version: no running voter")
	}
	return versions[0], nil
}
