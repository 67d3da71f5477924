package external

import (
	"context"
	"fmt"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
)

// refuseStrangers refuses every removal (etcd.ErrInvalidInput) while any endpoint answers for
// another etcd cluster: the endpoints then name members of two clusters, and which member list
// is authoritative is not known.
func refuseStrangers(o *membership.Observation, m etcd.Member) error {
	for _, a := range o.Answers {
		if o.Decision.Stranger(a) {
			return fmt.Errorf("%w: not removing etcd member %s: endpoint %s answers for etcd cluster %x, not %x; the endpoints name members of two clusters",
				etcd.ErrInvalidInput, m, a.Where, a.ClusterID, o.Decision.ClusterID)
		}
	}
	return nil
}

// reach is how the membership core reaches members of this cluster: a kept clientv3 client per
// endpoint, made with the credentials of one observation.
type reach struct {
	b     *Backend
	creds *credentials
}

// Reach returns the kept client of ep.
func (r reach) Reach(ctx context.Context, ep string) (membership.Client, error) {
	cli, err := r.b.client(ctx, ep, r.creds)
	if err != nil {
		return nil, err
	}
	return membership.NewClient(cli, cli, ep), nil
}

// Describe is rpcError: etcd's own answer as one bounded line, anything else classified.
func (r reach) Describe(ctx context.Context, ep, what string, err error) error {
	return r.b.rpcError(ctx, ep, what, err)
}

// Lost does nothing: clientv3 reconnects a kept client on its own.
func (reach) Lost(context.Context, string, membership.Client) {}

// Removing records the member: the one answering at its endpoint is asked for its member lists
// before its Status from now on (see mayBeRemoved).
func (r reach) Removing(target etcd.Member, _ string) {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	r.b.removing[target.ID] = true
}
