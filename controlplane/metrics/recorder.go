package metrics

import (
	"context"
	"errors"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// RemovalRecorder records member removals as ControlPlaneEtcd status updates show them end, and
// forgets a Cluster's series (ForgetCluster) when its ControlPlaneEtcd is deleted. It is a
// manager Runnable that runs on the elected leader only, so a removal is counted once however
// many replicas run; the leader is also the replica whose controllers observe etcd.
type RemovalRecorder struct {
	// Informers is the manager's cache.
	Informers cache.Informers
}

// NeedLeaderElection makes the recorder run on the leader only.
func (r *RemovalRecorder) NeedLeaderElection() bool { return true }

// Start watches ControlPlaneEtcd updates until ctx is done.
func (r *RemovalRecorder) Start(ctx context.Context) error {
	if r.Informers == nil {
		return errors.New("failed to start the removal recorder: Informers is nil")
	}
	inf, err := r.Informers.GetInformer(ctx, &v1alpha1.ControlPlaneEtcd{})
	if err != nil {
		return fmt.Errorf("failed to get the ControlPlaneEtcd informer: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			before, _ := oldObj.(*v1alpha1.ControlPlaneEtcd)
			after, _ := newObj.(*v1alpha1.ControlPlaneEtcd)
			RecordRemovalEnded(before, after)
		},
		DeleteFunc: forgetDeleted,
	})
	if err != nil {
		return fmt.Errorf("failed to watch ControlPlaneEtcd updates: %w", err)
	}
	<-ctx.Done()
	if err := inf.RemoveEventHandler(reg); err != nil {
		return fmt.Errorf("failed to stop watching ControlPlaneEtcd updates: %w", err)
	}
	return nil
}

// forgetDeleted forgets the series of the Cluster whose ControlPlaneEtcd the informer deleted,
// also when the informer missed the deletion and hands over the last state it knew.
func forgetDeleted(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if cpe, ok := obj.(*v1alpha1.ControlPlaneEtcd); ok {
		ForgetCluster(cpe.Namespace, cpe.Spec.ClusterName)
	}
}
