package handback

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/internal/setby"
)

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=list;watch;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcdadapter.cluster.x-k8s.io,resources=controlplaneetcds,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

const controllerName = "etcd-adapter-hook-handback"

// Reconciler hands back the Machines of Clusters no ControlPlaneEtcd manages.
type Reconciler struct {
	// Client is the manager's (cached) client.
	Client client.Client
	// APIReader re-reads the Cluster's ControlPlaneEtcds uncached right before a hook is taken
	// off, so one created a moment ago is never missed; nil reads through Client.
	APIReader client.Reader
	// Recorder records Events on Machines; nil means the manager's.
	Recorder record.EventRecorder
}

// SetupWithManager adds the controller to mgr. It watches only the Machines handsBack lets
// through.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil {
		return errors.New("failed to set up the hook hand-back controller: Client is nil")
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorderFor(controllerName) //nolint:staticcheck // core/v1 Events, as Cluster API v1.14's controllers record them; GetEventRecorder writes events.k8s.io/v1 Events (other RBAC, other objects for users)
	}
	if r.APIReader == nil {
		r.APIReader = r.Client
	}
	hooked := predicate.NewPredicateFuncs(handsBack)
	// Note: a Machine changes nothing when its ControlPlaneEtcd is deleted or its Cluster opts
	// out, so both map to the Cluster's hooked Machines.
	err := ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.Machine{}, builder.WithPredicates(hooked)).
		Watches(&v1alpha1.ControlPlaneEtcd{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []ctrl.Request {
			return r.hookedMachines(ctx, o.GetNamespace(), o.(*v1alpha1.ControlPlaneEtcd).Spec.ClusterName)
		})).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []ctrl.Request {
			return r.hookedMachines(ctx, o.GetNamespace(), o.GetName())
		})).
		Named(controllerName).
		WithOptions(options).
		Complete(r)
	if err != nil {
		return fmt.Errorf("failed to set up the hook hand-back controller: %w", err)
	}
	return nil
}

// handsBack says whether the hand-back looks at a Machine: a control-plane or etcd Machine
// (backends.IsControlPlaneOrEtcdMachine) that carries the hook. Those are the only Machines the
// Machine hook webhook and the ControlPlaneEtcd controller put the hook on. A worker Machine is
// never looked at, whatever its annotations: the manager's cache keeps worker Machines without
// annotations or spec (setup.TrimMachine), so its hook, had anyone put it there, could be neither
// seen nor its Cluster read from the cache.
//
// A control-plane or etcd Machine that carries etcd-adapter's EtcdAdapterMemberHealthy condition
// is looked at too, so the condition is taken off once no ControlPlaneEtcd is in charge of its
// Cluster (membercondition.go), in mode Observe as in Manage.
func handsBack(o client.Object) bool {
	if !backends.IsControlPlaneOrEtcdMachine(o.GetLabels()) {
		return false
	}
	if o.GetAnnotations()[v1alpha1.PreTerminateHookAnnotation] != "" {
		return true
	}
	m, ok := o.(*clusterv1.Machine)
	return ok && conditions.Has(m, v1alpha1.MemberHealthyMachineCondition)
}

// hookedMachines maps to the Cluster's control-plane and etcdadm etcd Machines that carry the
// hook (the Machines handsBack looks at).
func (r *Reconciler) hookedMachines(ctx context.Context, namespace, clusterName string) []ctrl.Request {
	if clusterName == "" {
		return nil
	}
	machines, err := backends.ListControlPlaneAndEtcdMachines(ctx, r.Client, namespace, clusterName)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the control-plane and etcd Machines of a Cluster", "Cluster", klog.KRef(namespace, clusterName))
		return nil
	}
	var out []ctrl.Request
	for _, m := range machines {
		if handsBack(m) {
			out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(m)})
		}
	}
	return out
}

// Reconcile takes the hook off one Machine when nothing will ever release it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &clusterv1.Machine{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !handsBack(m) {
		return ctrl.Result{}, nil
	}
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, cluster); err != nil {
		// Note: a Cluster this manager's cache does not hold is another shard's (--watch-filter)
		// or not created yet (Cluster API allows a Machine first): never act on it.
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get Cluster %s: %w", m.Spec.ClusterName, err)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(cluster), "Machine", klog.KObj(m))
	if annotations.IsPaused(cluster, m) {
		// clusterctl move pauses the Cluster while it copies it, ControlPlaneEtcd last.
		return ctrl.Result{}, nil
	}
	if err := r.takeOffMemberCondition(ctx, cluster, m); err != nil {
		return ctrl.Result{}, err
	}
	if m.Annotations[v1alpha1.PreTerminateHookAnnotation] == "" {
		return ctrl.Result{}, nil
	}
	why, handBack, err := r.unmanaged(ctx, cluster)
	if err != nil || !handBack {
		return ctrl.Result{}, err
	}
	before := m.DeepCopy()
	delete(m.Annotations, v1alpha1.PreTerminateHookAnnotation)
	if err := r.Client.Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to take the pre-terminate hook off Machine %s: %w", klog.KObj(m), err)
	}
	msg := "Took the etcd-adapter pre-terminate hook off: " + why
	eventType := corev1.EventTypeNormal
	if !m.DeletionTimestamp.IsZero() {
		eventType = corev1.EventTypeWarning
		msg = fmt.Sprintf("Released the etcd-adapter pre-terminate hook without removing the etcd member of Node %q: %s", m.Status.NodeRef.Name, why)
	}
	if live := r.liveCluster(ctx, cluster); optedOut(live) {
		// Note: a person's switch-off of the hook and the guard for the whole Cluster; recorded
		// on the Cluster too, which carries the annotation.
		msg = fmt.Sprintf("%s; %s", msg, setby.Annotation(live, v1alpha1.OptOutAnnotation))
		r.Recorder.Event(m, corev1.EventTypeWarning, v1alpha1.EventHookHandedBackOptedOut, msg)
		r.Recorder.Event(cluster, corev1.EventTypeWarning, v1alpha1.EventHookHandedBackOptedOut, fmt.Sprintf("Machine %s: %s", m.Name, msg))
	} else {
		r.Recorder.Event(m, eventType, v1alpha1.EventHookHandedBack, msg)
	}
	log.Info("Handed the Machine back: took the pre-terminate hook off", "why", why)
	return ctrl.Result{}, nil
}

// liveCluster re-reads the Cluster uncached for the Event's reason: the cache can still miss an
// opt-out annotation set right before the ControlPlaneEtcd was deleted (the Machine event that
// started this pass comes from that deletion), and a person's switch-off must not be recorded as
// a plain hand-back. It falls back to the cached Cluster when the read fails.
func (r *Reconciler) liveCluster(ctx context.Context, cached *clusterv1.Cluster) *clusterv1.Cluster {
	live := &clusterv1.Cluster{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cached), live); err != nil {
		return cached
	}
	return live
}

// optedOut reports whether the Cluster is unmanaged because a person opted it out: its
// control-plane kind would get a ControlPlaneEtcd by default otherwise, and it is not being
// deleted (which hands every Machine back anyway).
func optedOut(cluster *clusterv1.Cluster) bool {
	_, hasDefault := creation.Defaults[cluster.Spec.ControlPlaneRef.Kind]
	return hasDefault && cluster.DeletionTimestamp.IsZero() && cluster.Annotations[v1alpha1.OptOutAnnotation] == v1alpha1.AnnotationTrue
}

// unmanaged says whether no ControlPlaneEtcd manages the Cluster nor will: none names it, and
// it gets none in Manage mode by default (it opted out, or its control-plane kind has no default
// in Manage). It reads uncached, as the safety check right before the hook is taken off.
func (r *Reconciler) unmanaged(ctx context.Context, cluster *clusterv1.Cluster) (string, bool, error) {
	cpe, err := creation.LiveControlPlaneEtcdOf(ctx, r.APIReader, cluster)
	if err != nil || cpe != nil {
		// The ControlPlaneEtcd controller owns the hook; outside Manage mode it hands it back.
		return "", false, err
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return fmt.Sprintf("Cluster %s is being deleted and has no ControlPlaneEtcd", cluster.Name), true, nil
	}
	if d, ok := creation.DefaultFor(cluster); ok && d.Mode == v1alpha1.ModeManage {
		// The creation controller is about to make its ControlPlaneEtcd, which releases the hook.
		return "", false, nil
	}
	return fmt.Sprintf("Cluster %s has no ControlPlaneEtcd and gets none in Manage mode by default (control plane %q, or annotation %s)",
		cluster.Name, cluster.Spec.ControlPlaneRef.Kind, v1alpha1.OptOutAnnotation), true, nil
}
