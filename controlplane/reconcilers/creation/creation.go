package creation

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// Default is the backend and mode a ControlPlaneEtcd gets when this controller creates it.
type Default struct {
	Backend v1alpha1.Backend
	Mode    v1alpha1.Mode
}

// Defaults maps a control-plane kind to the backend and mode its ControlPlaneEtcd gets.
var Defaults = map[string]Default{
	"KubeadmControlPlane": {v1alpha1.BackendKubeadm, v1alpha1.ModeObserve},
	"KThreesControlPlane": {v1alpha1.BackendK3s, v1alpha1.ModeManage},
	"RKE2ControlPlane":    {v1alpha1.BackendRKE2, v1alpha1.ModeManage},
}

// Reconciler creates ControlPlaneEtcds for Clusters.
type Reconciler struct {
	// Client is the manager's client of the management cluster.
	Client client.Client
}

// SetupWithManager adds the controller to mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil {
		return errors.New("failed to set up the ControlPlaneEtcd creation controller: Client is nil")
	}
	err := ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.Cluster{}).
		Named("controlplaneetcd-creation").
		WithOptions(options).
		Complete(r)
	if err != nil {
		return fmt.Errorf("failed to set up the ControlPlaneEtcd creation controller: %w", err)
	}
	return nil
}

// Reconcile creates the Cluster's ControlPlaneEtcd when it should have one and has none. It never
// updates one: a person may have changed its backend or mode.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(cluster))
	if !cluster.DeletionTimestamp.IsZero() || annotations.HasPaused(cluster) || cluster.Spec.Paused != nil && *cluster.Spec.Paused {
		return ctrl.Result{}, nil
	}
	d, ok := DefaultFor(cluster)
	if !ok {
		return ctrl.Result{}, nil
	}
	// Note: a cached read first, so the Cluster's many updates cost no write each.
	if err := r.Client.Get(ctx, req.NamespacedName, &v1alpha1.ControlPlaneEtcd{}); err == nil || !apierrors.IsNotFound(err) {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cpe := newControlPlaneEtcd(cluster, d)
	if err := controllerutil.SetOwnerReference(cluster, cpe, r.Client.Scheme()); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to set the owner of ControlPlaneEtcd %s: %w", klog.KObj(cpe), err)
	}
	if err := r.Client.Create(ctx, cpe); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to create ControlPlaneEtcd %s: %w", klog.KObj(cpe), err)
	}
	log.Info("Created ControlPlaneEtcd", "backend", d.Backend, "mode", d.Mode)
	return ctrl.Result{}, nil
}

// DefaultFor is the rule by which a Cluster gets a ControlPlaneEtcd without anyone creating one:
// its control-plane kind has a default and it did not opt out with v1alpha1.OptOutAnnotation.
// The Machine hook webhook asks the same rule for a Cluster whose ControlPlaneEtcd does not exist
// yet, so the two never disagree about which Clusters are managed.
func DefaultFor(cluster *clusterv1.Cluster) (Default, bool) {
	if _, optOut := cluster.Annotations[v1alpha1.OptOutAnnotation]; optOut {
		return Default{}, false
	}
	d, ok := Defaults[cluster.Spec.ControlPlaneRef.Kind]
	return d, ok
}

// newControlPlaneEtcd builds the Cluster's ControlPlaneEtcd. It carries the Cluster's
// cluster.x-k8s.io/watch-filter label, so a manager that shares a fleet by --watch-filter (and
// any label selector on ControlPlaneEtcds) sees it with its Cluster.
func newControlPlaneEtcd(cluster *clusterv1.Cluster, d Default) *v1alpha1.ControlPlaneEtcd {
	labels := map[string]string{clusterv1.ClusterNameLabel: cluster.Name}
	if v, ok := cluster.Labels[clusterv1.WatchLabel]; ok {
		labels[clusterv1.WatchLabel] = v
	}
	return &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Name, Labels: labels},
		Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: cluster.Name, Backend: d.Backend, Mode: d.Mode},
	}
}
