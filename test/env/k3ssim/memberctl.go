package k3ssim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// memberControllerName is K3s's handler name for both the removal and the finalizer.
const memberControllerName = "managed-etcd-controller"

// memberController is one run of K3s's member controller (removal by annotation and the
// Node-deletion finalizer). K3s runs it leader-elected (Lease k3s-etcd in kube-system); the
// simulator runs exactly one, so the Lease itself is not simulated.
type memberController struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// memberReconciler adapts the member controller to controller-runtime. An error return is
// K3s's "requeue with backoff, only logged".
type memberReconciler struct {
	sim    *Simulator
	reader client.Reader
}

// Reconcile syncs one Node and counts every requeue by error.
func (r *memberReconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	err := r.reconcile(ctx, req.Name)
	if err != nil {
		r.sim.countRequeue(req.Name)
	}
	return ctrl.Result{}, err
}

func (r *memberReconciler) reconcile(ctx context.Context, name string) error {
	// Read from the apiserver, not the cache, so a requeue is K3s behaviour and not a stale read.
	node := &corev1.Node{}
	if err := r.reader.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !node.DeletionTimestamp.IsZero() {
		return r.sim.reconcileDelete(ctx, node)
	}
	if added, err := r.sim.ensureFinalizer(ctx, node); err != nil || added {
		// No need to go on: the finalizer update triggers the next sync.
		return err
	}
	return r.sim.syncRemoval(ctx, node)
}

// StartMemberController starts the member controller (removal by annotation and the Node
// finalizer); it returns once its cache has synced. Starting a running controller is a no-op.
func (s *Simulator) StartMemberController(ctx context.Context) error {
	s.mu.Lock()
	running := s.memberCtl != nil
	s.mu.Unlock()
	if running {
		return nil
	}
	mgr, err := ctrl.NewManager(s.opts.RESTConfig, ctrl.Options{
		Scheme:                 s.scheme,
		Logger:                 s.log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(false)},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}: {Label: labels.SelectorFromSet(s.opts.ClusterLabels)},
		}},
	})
	if err != nil {
		return fmt.Errorf("failed to create member controller manager: %w", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.Node{}).Named(memberControllerName).
		WithOptions(controller.Options{RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](
			s.opts.RequeueBaseDelay, s.opts.RequeueMaxDelay)}).
		Complete(&memberReconciler{sim: s, reader: mgr.GetAPIReader()})
	if err != nil {
		return fmt.Errorf("failed to create member controller: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	mc := &memberController{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(mc.done)
		if err := mgr.Start(runCtx); err != nil {
			s.log.Error(err, "Member controller stopped")
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		<-mc.done
		return fmt.Errorf("failed to sync member controller cache: %w", ctx.Err())
	}
	s.mu.Lock()
	s.memberCtl = mc
	s.mu.Unlock()
	return nil
}

// StopMemberController stops the member controller (fault: removals and Node deletions of
// etcd Nodes wait); StartMemberController starts it again.
func (s *Simulator) StopMemberController() {
	s.mu.Lock()
	mc := s.memberCtl
	s.memberCtl = nil
	s.mu.Unlock()
	if mc == nil {
		return
	}
	mc.cancel()
	<-mc.done
}

// Requeues returns how often the member controller's sync of Node node failed and was
// requeued; on the 1.28.3 – 1.34.1 profile it keeps growing after a removal until the server
// rejoins (the requeue-forever bug PR 12920 fixed).
func (s *Simulator) Requeues(node string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requeues[node]
}

func (s *Simulator) countRequeue(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requeues[node]++
}
