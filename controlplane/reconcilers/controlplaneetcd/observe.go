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

// askRemoval asks the backend to remove m through this pass's observation, the one the quorum
// projection ran on, when the backend can (etcd.ObservedChanger): observing every member again
// would cost a round of calls and decide nothing, since the projection is not run again on it.
// Another backend observes again first.
func (s *scope) askRemoval(ctx context.Context, m etcd.Member) (etcd.Removal, error) {
	if oc, ok := s.backend.(etcd.ObservedChanger); ok {
		return oc.RemoveMemberObserved(ctx, s.snapshot, m)
	}
	return s.backend.RemoveMember(ctx, m)
}

// askLeaderMove asks the backend to move leadership off from to to through this pass's
// observation when the backend can (etcd.ObservedChanger), as askRemoval.
func (s *scope) askLeaderMove(ctx context.Context, from, to etcd.Member) (etcd.LeaderMove, error) {
	if oc, ok := s.backend.(etcd.ObservedChanger); ok {
		return oc.MoveLeaderObserved(ctx, s.snapshot, from, to)
	}
	return s.backend.MoveLeader(ctx, from, to)
}
