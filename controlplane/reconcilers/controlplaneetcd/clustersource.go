package controlplaneetcd

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// readToTheEnd reads the ClusterCache's connect and disconnect events for as long as the process
// runs, not only while the controller runs.
//
// Note: Cluster API's ClusterCache sends each event on an unbuffered channel while it holds the
// lock of all its consumers (clustercache.sendEventsToClusterSources in Cluster API v1.14), and
// the source that reads the channel stops with the context it was started with. The
// controller's sources start with its warm-up, and on shutdown controller-runtime stops warm-up
// runnables at the same time as, or before, the ClusterCache's workers; an event sent after that
// blocks a ClusterCache worker for ever, and the manager never stops within its grace period.
// Read to the end, an event that comes after the controller stopped goes to its queue, which was
// shut down and drops it.
type readToTheEnd struct {
	source.Source
}

// Start starts the ClusterCache's source with a context that is never cancelled.
func (s readToTheEnd) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	return s.Source.Start(context.WithoutCancel(ctx), queue)
}
