package controlplaneetcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// +kubebuilder:rbac:groups=etcdadapter.cluster.x-k8s.io,resources=controlplaneetcds,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=etcdadapter.cluster.x-k8s.io,resources=controlplaneetcds/status,verbs=patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=list;watch;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=kubeadmcontrolplanes;kthreescontrolplanes;rke2controlplanes,verbs=list;watch
// +kubebuilder:rbac:groups=etcdcluster.cluster.x-k8s.io,resources=etcdadmclusters,verbs=list;watch

// backendsFor hands out the etcd.Cluster of a Cluster and closes the one of a Cluster that is gone;
// backends.Registry is the one in use.
type backendsFor interface {
	For(ctx context.Context, cluster *clusterv1.Cluster, backend v1alpha1.Backend) (etcd.Cluster, error)
	Forget(uid types.UID) error
}

var _ backendsFor = &backends.Registry{}

// Reconciler reconciles ControlPlaneEtcd objects.
type Reconciler struct {
	// Client is the manager's (cached) client of the management cluster.
	Client client.Client
	// APIReader reads the ControlPlaneEtcd uncached at the start of a pass when the cached copy
	// is not the newest this controller knows (see read.go), and the Machines right before a
	// retry is taken off (the manager's GetAPIReader()); nil reads everything through Client.
	APIReader client.Reader
	// ClusterCache reaches the workload clusters.
	ClusterCache clustercache.ClusterCache
	// Backends hands out each Cluster's etcd.Cluster (a *backends.Registry).
	Backends backendsFor
	// ConnectionLost, when set, enqueues the ControlPlaneEtcds of the Clusters it is notified
	// of (wire its Notify to Backends.ConnectionLost); nil: a lost member connection shows at
	// the next periodic observation.
	ConnectionLost *ConnectionLost
	// Recorder records Events on Machines and ControlPlaneEtcds.
	Recorder record.EventRecorder
	// CallTimeout bounds one observation; zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// ObservationInterval is how often etcd is observed when nothing else happens, for a
	// ControlPlaneEtcd without spec.observationInterval (which wins); zero means
	// v1alpha1.DefaultObservationInterval.
	ObservationInterval time.Duration
	// SnapshotScratchDir is where a snapshot's database is written while it is uploaded, for
	// the consistency and revision checks (spec.snapshot); empty: only the sha256 trailer and
	// the stored size are checked.
	SnapshotScratchDir string
	// SnapshotTimeout bounds one snapshot's stream, verification and upload; zero means
	// DefaultSnapshotTimeout.
	SnapshotTimeout time.Duration
	// Now returns the current time; nil means time.Now. Only used for testing.
	Now func() time.Time
	// AtStep, when set, is called at each step boundary of the removal flow (the Step*
	// constants), so a test can stop the controller exactly there. Only used for testing.
	AtStep func(ctx context.Context, step string)

	controller controller.Controller
	// seen maps a ControlPlaneEtcd's key to the Cluster (seenCluster) it was last reconciled
	// against (see forget.go).
	seen sync.Map
	// versions maps a ControlPlaneEtcd's key to the newest resourceVersion this controller
	// knows for it (see read.go).
	versions sync.Map
}

// SetupWithManager adds the controller to mgr. Node events of workload clusters reach it through
// ClusterCache watches added on the first reconcile of each Cluster, and lost kubeadm member
// connections through ConnectionLost.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	switch {
	case r.Client == nil:
		return errors.New("failed to set up the ControlPlaneEtcd controller: Client is nil")
	case r.ClusterCache == nil:
		return errors.New("failed to set up the ControlPlaneEtcd controller: ClusterCache is nil")
	case r.Backends == nil:
		return errors.New("failed to set up the ControlPlaneEtcd controller: Backends is nil")
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorderFor(controllerName + "-controller") //nolint:staticcheck // core/v1 Events, as Cluster API v1.14's controllers record them; GetEventRecorder writes events.k8s.io/v1 Events (other RBAC, other objects for users)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ControlPlaneEtcd{}).
		Named(controllerName).
		WithOptions(options).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToControlPlaneEtcd)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToControlPlaneEtcd)).
		WatchesRawSource(readToTheEnd{Source: r.ClusterCache.GetClusterSource(controllerName, r.clusterToControlPlaneEtcd)})
	if r.ConnectionLost != nil {
		b = b.WatchesRawSource(source.Channel(r.ConnectionLost.events, handler.EnqueueRequestsFromMapFunc(r.clusterToControlPlaneEtcd)))
	}
	c, err := b.Build(r)
	if err != nil {
		return fmt.Errorf("failed to set up the ControlPlaneEtcd controller: %w", err)
	}
	r.controller = c
	return nil
}

// Step boundaries of the removal flow, for Reconciler.AtStep.
const (
	// StepQuorumChecked: the quorum projection allowed the removal; nothing was asked yet.
	StepQuorumChecked = "QuorumChecked"
	// StepLeaderMoved: leadership was moved off the member to remove (in its Machine's hook
	// phase, or already while the Machine drains); its removal was not asked yet (a later pass
	// asks it on a fresh observation).
	StepLeaderMoved = "LeaderMoved"
	// StepRemovalRecorded: status.removal says the removal is InProgress; nothing was asked yet.
	StepRemovalRecorded = "RemovalRecorded"
	// StepRemovalRequested: the backend was asked to remove the member.
	StepRemovalRequested = "RemovalRequested"
	// StepRemovedBeforeRelease: the member is confirmed gone; the hook is not released yet.
	StepRemovedBeforeRelease = "RemovedBeforeRelease"
	// StepHookReleased: the hook was released; the pass's status is not written yet.
	StepHookReleased = "HookReleased"
)

func (r *Reconciler) atStep(ctx context.Context, step string) {
	if r.AtStep != nil {
		r.AtStep(ctx, step)
	}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) callTimeout() time.Duration {
	if r.CallTimeout > 0 {
		return r.CallTimeout
	}
	return DefaultCallTimeout
}

// Reconcile observes one Cluster's etcd, acts on it in Manage mode, and writes the status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	cpe, err := r.read(ctx, req.NamespacedName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.forget(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cpe.Namespace, Name: cpe.Spec.ClusterName}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			log.Info("Waiting for Cluster to exist", "Cluster", klog.KRef(cpe.Namespace, cpe.Spec.ClusterName))
			return ctrl.Result{}, r.forget(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, fmt.Errorf("failed to get Cluster %s: %w", cpe.Spec.ClusterName, err)
	}
	log = log.WithValues("Cluster", klog.KObj(cluster))
	ctx = ctrl.LoggerInto(ctx, log)
	if err := r.clusterSeen(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, err
	}

	helper, err := patch.NewHelper(cpe, r.recording())
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to create a patch helper for ControlPlaneEtcd %s: %w", klog.KObj(cpe), err)
	}
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, cpe); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	if inCharge, err := r.inChargeOtherThan(ctx, cpe, cluster); err != nil || inCharge != nil {
		if inCharge != nil {
			r.setDuplicateConditions(ctx, cpe, inCharge)
			err = helper.Patch(ctx, cpe, patch.WithOwnedConditions{Conditions: ownedConditions})
		}
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to reconcile duplicate ControlPlaneEtcd %s: %w", klog.KObj(cpe), err)
		}
		// Looked at again now and then: nothing wakes it when the one in charge goes.
		return ctrl.Result{RequeueAfter: cpe.Spec.ObservationIntervalOr(r.ObservationInterval)}, nil
	}
	s, err := r.newScope(ctx, cpe, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		setStatus(s)
		memberConditions := setMachineMembers(s)
		opts := []patch.Option{patch.WithOwnedConditions{Conditions: ownedConditions}}
		if reterr == nil {
			opts = append(opts, patch.WithStatusObservedGeneration{})
		}
		if err := helper.Patch(ctx, cpe, opts...); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, fmt.Errorf("failed to patch ControlPlaneEtcd %s: %w", klog.KObj(cpe), err)})
			return
		}
		reterr = kerrors.NewAggregate([]error{reterr, r.writeMemberConditions(ctx, memberConditions)})
	}()
	return r.reconcile(ctx, s)
}

// ownedConditions are every condition this controller sets, on every pass.
var ownedConditions = []string{
	v1alpha1.EtcdClusterHealthyCondition,
	v1alpha1.AvailableCondition,
	v1alpha1.DegradedCondition,
	v1alpha1.ProgressingCondition,
	v1alpha1.PausedCondition,
	v1alpha1.ClusterIDMatchedCondition,
}

// reconcile runs the phases in order; each returns early when it made a change or must wait.
func (r *Reconciler) reconcile(ctx context.Context, s *scope) (ctrl.Result, error) {
	r.observe(ctx, s)
	r.checkClusterID(s)
	dropSyntheticMemberID(s)
	if err := r.watchNodes(ctx, s); err != nil {
		ctrl.LoggerFrom(ctx).V(4).Info("Not watching workload Nodes yet", "err", err.Error())
	}
	if result, err := r.reconcileMaintenance(ctx, s); err != nil || !result.IsZero() {
		return result, err
	}
	if !s.manages() {
		return r.handBackMachines(ctx, s)
	}
	if err := r.ensureHooks(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if result, err := r.reconcileRetries(ctx, s); err != nil || !result.IsZero() {
		return result, err
	}
	if result, err := r.reconcileDeletingMachines(ctx, s); err != nil || !result.IsZero() {
		return result, err
	}
	if result, err := r.reconcileGhosts(ctx, s); err != nil || !result.IsZero() {
		return result, err
	}
	return s.requeue(), nil
}

// watchNodes makes Node changes of the workload cluster reconcile this ControlPlaneEtcd: K3s
// reports member health and removals on Nodes.
//
// Note: the manager's ClusterCache holds the etcd Nodes only (k3s.NodeCacheOptions), so worker
// Nodes, and the Nodes of a kubeadm cluster, which carry no etcd label, start no reconcile. A
// kubeadm cluster's passes come from its Machines' events, its lost member connections
// (ConnectionLost) and the observation interval; its backend lists Nodes live when it places
// members. So the watch is added for K3s and RKE2 Clusters only: on a kubeadm or external
// Cluster it would be an informer, a watch and their goroutines per Cluster that never deliver.
func (r *Reconciler) watchNodes(ctx context.Context, s *scope) error {
	if r.controller == nil {
		return nil
	}
	if b := s.cpe.Spec.Backend; b != v1alpha1.BackendK3s && b != v1alpha1.BackendRKE2 {
		return nil
	}
	key := client.ObjectKeyFromObject(s.cpe)
	return r.ClusterCache.Watch(ctx, client.ObjectKeyFromObject(s.cluster), clustercache.NewWatcher(clustercache.WatcherOptions{
		Name:    controllerName + "-nodes",
		Watcher: r.controller,
		Kind:    &corev1.Node{},
		EventHandler: handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []ctrl.Request {
			return []ctrl.Request{{NamespacedName: key}}
		}),
		Predicates: []predicate.Predicate{nodeChanged()},
	}))
}
