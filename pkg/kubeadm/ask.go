package kubeadm

import (
	"context"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
)

// askAll asks every Node's member at once, at most MaxConcurrency at a time.
func (b *Backend) askAll(ctx context.Context, nodes []string, creds *credentials) []membership.Answer {
	return membership.AskAll(ctx, nodes, b.cfg.MaxConcurrency, func(ctx context.Context, node string) membership.Answer {
		return b.askMemberOn(ctx, node, creds)
	})
}

// askMemberOn asks the member on node for its status, member list and alarms (membership.AskMember). A kept
// connection that turns out broken is replaced once, so a stale port-forward costs one retry,
// not a verdict.
func (b *Backend) askMemberOn(ctx context.Context, node string, creds *credentials) membership.Answer {
	for attempt := 0; ; attempt++ {
		c, reused, err := b.pool.getReused(ctx, node, creds)
		if err != nil {
			return membership.Answer{Where: node, At: time.Now(), Err: err}
		}
		a := membership.AskMember(ctx, reach{b: b, creds: creds}, c, node, membership.Asking{
			Timeout: b.callTimeoutFor(reused), MayBeRemoved: b.mayBeRemoved(node), Gone: b.Memory.Gone,
		})
		if a.Answered() || attempt > 0 || (!reused && !closedUnderneath(ctx, a.Err)) {
			if !a.Answered() {
				b.dropUnlessCallerEnded(ctx, node, c)
			}
			return a
		}
		b.logger(ctx).V(4).Info("Retrying etcd member on a new connection", "node", node, "err", a.Err.Error())
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

// mayBeRemoved reports whether the member on node may have been removed: this backend sent a
// removal through or about it, the last member list has no member of that name, or this
// backend has observed nothing yet (a manager that just started does not know what the one
// before it removed).
func (b *Backend) mayBeRemoved(node string) bool {
	b.mu.Lock()
	removing := b.removedOn[node]
	b.mu.Unlock()
	_, last := b.Memory.Recall()
	if removing || last == nil {
		return true
	}
	return !slices.ContainsFunc(last, func(m etcd.Member) bool { return m.Name == node })
}

// markRemoving records that the member's Node may soon run a removed member.
func (b *Backend) markRemoving(m etcd.Member) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.removedOn == nil {
		b.removedOn = map[string]bool{}
	}
	if m.NodeName != "" {
		b.removedOn[m.NodeName] = true
	}
}
