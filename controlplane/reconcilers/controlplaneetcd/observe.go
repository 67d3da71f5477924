package controlplaneetcd

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/controlplane/metrics"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// observe takes a fresh snapshot of the Cluster's etcd into the scope, within the call timeout so
// that a dead workload cluster holds this worker only that long. A failure is a status, not an
// error of the pass: it becomes Unknown conditions with the reason.
func (r *Reconciler) observe(ctx context.Context, s *scope) {
	s.snapshot, s.observeErr = nil, nil
	start := r.now()
	defer func() {
		metrics.RecordObservation(string(s.cpe.Spec.Backend), r.now().Sub(start), s.observeErr)
		metrics.RecordSnapshot(s.cpe.Namespace, s.cpe.Spec.ClusterName, s.snapshot)
	}()
	backend, err := r.Backends.For(ctx, s.cluster, s.cpe.Spec.Backend)
	if err != nil {
		s.observeErr = err
		ctrl.LoggerFrom(ctx).V(2).Info("Cannot reach etcd", "err", err.Error())
		return
	}
	s.backend = backend
	ctx, cancel := context.WithTimeoutCause(ctx, r.callTimeout(), fmt.Errorf("%w: observing etcd took longer than %s", etcd.ErrUnreachable, r.callTimeout()))
	defer cancel()
	s.snapshot, s.observeErr = backend.Observe(ctx)
	if s.observeErr != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Failed to observe etcd", "err", s.observeErr.Error())
	}
}
