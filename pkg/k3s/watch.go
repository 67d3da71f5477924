package k3s

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// notifier wakes the waiters of a Node when an event about it arrives.
type notifier struct {
	mu       sync.Mutex
	attached bool
	waiters  map[string]map[chan struct{}]struct{}
}

func newNotifier() *notifier {
	return &notifier{waiters: map[string]map[chan struct{}]struct{}{}}
}

// subscribe returns a channel that receives a value after each event about node (coalesced),
// and a function that unsubscribes.
func (n *notifier) subscribe(node string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waiters[node] == nil {
		n.waiters[node] = map[chan struct{}]struct{}{}
	}
	n.waiters[node][ch] = struct{}{}
	return ch, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.waiters[node], ch)
		if len(n.waiters[node]) == 0 {
			delete(n.waiters, node)
		}
	}
}

func (n *notifier) notify(node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.waiters[node] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (n *notifier) watching() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.attached
}

func (n *notifier) markAttached() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.attached = true
}

// handler turns informer events into notifications. The informer updates its store before it
// calls handlers, so a woken waiter reads the new Node from a cache backed by that informer.
func (n *notifier) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.notifyObject(obj) },
		UpdateFunc: func(_, obj any) { n.notifyObject(obj) },
		DeleteFunc: func(obj any) { n.notifyObject(obj) },
	}
}

func (n *notifier) notifyObject(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(client.Object); ok {
		n.notify(o.GetName())
	}
}

// AttachInformer makes the Backend notice Node changes from a Node informer, typically the one
// behind Config.Reader, so that WaitForRemoval ends as soon as K3s reports.
func (b *Backend) AttachInformer(informer ctrlcache.Informer) error {
	if _, err := informer.AddEventHandler(b.notes.handler()); err != nil {
		return fmt.Errorf("failed to add Node event handler: %w", err)
	}
	b.notes.markAttached()
	return nil
}

// Watcher returns a NodeWatcher for the Backend, to pass to Cluster API's ClusterCache:
// clusterCache.Watch(ctx, clusterKey, backend.Watcher()). Use it with Config.Reader from
// clusterCache.GetReader, so a notified read sees the event's Node.
func (b *Backend) Watcher() *NodeWatcher { return &NodeWatcher{b: b} }

// NodeWatcher attaches a Backend to the Node informer of a workload cluster's cache. It has the
// methods of Cluster API's clustercache.Watcher (Name, Object, Watch; the same interface since
// Cluster API v1.9), so this package does not import Cluster API and a provider on any of those
// versions can use it.
type NodeWatcher struct{ b *Backend }

// Name names the watch for the ClusterCache.
func (w *NodeWatcher) Name() string { return "etcd-adapter-k3s-nodes" }

// Object is the kind watched: Nodes.
func (w *NodeWatcher) Object() client.Object { return &corev1.Node{} }

// Watch attaches the Backend to the Node informer of the workload cluster's cache c, without
// waiting for the informer to sync.
func (w *NodeWatcher) Watch(c ctrlcache.Cache) error {
	informer, err := c.GetInformer(context.Background(), &corev1.Node{}, ctrlcache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("failed to get Node informer: %w", err)
	}
	return w.b.AttachInformer(informer)
}

// WaitForRemoval requests the removal of member m, as RemoveMember does, and
// returns once it is Removed or Rejected, re-checking on every event about the Node (and, as a
// safety net, every Config.Resync). When ctx ends first it returns the last InProgress result
// with ctx's error. It needs a Node watch (Start, AttachInformer or Watcher).
func (b *Backend) WaitForRemoval(ctx context.Context, m etcd.Member) (etcd.Removal, error) {
	nodeName := m.NodeName
	if !b.notes.watching() {
		return etcd.Removal{}, fmt.Errorf("%w: %w", etcd.ErrInvalidInput, errNoWatch)
	}
	events, unsubscribe := b.notes.subscribe(nodeName)
	defer unsubscribe()
	resync := time.NewTicker(b.cfg.Resync)
	defer resync.Stop()
	for {
		r, err := b.RemoveMember(ctx, m)
		if err != nil || r.State != etcd.RemovalInProgress {
			return r, err
		}
		select {
		case <-events:
		case <-resync.C:
		case <-b.recheck(ctx, m):
		case <-ctx.Done():
			r = b.lastWord(ctx, m, r)
			return r, fmt.Errorf("stopped waiting for the removal of etcd member %s on Node %s: %s: %w", m.Name, nodeName, r.Reason, context.Cause(ctx))
		}
	}
}

// lastWord re-reads the Node from the cache when a wait ends, so the result says how long the
// removal has been waiting by then; it never writes.
func (b *Backend) lastWord(ctx context.Context, m etcd.Member, last etcd.Removal) etcd.Removal {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.CallTimeout)
	defer cancel()
	step, _, err := b.currentStep(ctx, b.cfg.Reader, m)
	if err != nil || step.request || step.confirm {
		return last
	}
	return step.result
}

// recheck returns a channel that fires when the evidence a claimed removal waits on is due
// without a Node event (claimEvidence), or never.
func (b *Backend) recheck(ctx context.Context, m etcd.Member) <-chan time.Time {
	step, _, err := b.currentStep(ctx, b.cfg.Reader, m)
	if err != nil || step.recheckAt.IsZero() {
		return nil
	}
	return time.After(max(step.recheckAt.Sub(b.cfg.Now()), 0) + time.Millisecond)
}
