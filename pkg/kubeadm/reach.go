package kubeadm

import (
	"context"
	"errors"
	"fmt"

	"github.com/etcd-adapter/etcd-adapter/internal/etcdrpc"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
)

// reach is how the membership core reaches members of this cluster: the member of a Node
// through the port-forward of the pooled connection, with the credentials of one observation.
type reach struct {
	b     *Backend
	creds *credentials
}

// Reach returns the pooled connection to the member on node.
func (t reach) Reach(ctx context.Context, node string) (membership.Client, error) {
	c, err := t.b.pool.get(ctx, node, t.creds)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Describe says which Node's etcd failed, and wraps etcd.ErrUnreachable when etcd did not
// answer.
func (reach) Describe(_ context.Context, node, what string, err error) error {
	switch {
	case errors.Is(err, etcd.ErrTooLarge):
		return fmt.Errorf("etcd on Node %s: %w", node, err)
	case etcdrpc.IsEtcdAnswer(err):
		return fmt.Errorf("etcd on Node %s answered %s: %w", node, what, err)
	}
	return fmt.Errorf("%w: etcd on Node %s did not answer: %w", etcd.ErrUnreachable, node, err)
}

// Lost drops the pooled connection, unless the caller's own context ended.
func (t reach) Lost(ctx context.Context, node string, c membership.Client) {
	if mc, ok := c.(*memberClient); ok {
		t.b.dropUnlessCallerEnded(ctx, node, mc)
	}
}

// Removing records the Node of the member being removed (see mayBeRemoved).
func (t reach) Removing(target etcd.Member, via string) {
	t.b.markRemoving(target)
	if t.b.beforeRemove != nil {
		go t.b.beforeRemove(via)
	}
}
