package creation

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

// DefaultSpec is the backend and mode a ControlPlaneEtcd gets when this controller creates it.
type DefaultSpec struct {
	Backend v1alpha1.Backend
	Mode    v1alpha1.Mode
}

// Defaults maps a control-plane kind to the backend and mode its ControlPlaneEtcd gets.
var Defaults = map[string]DefaultSpec{
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
// changes the spec of one (a person may have changed its backend or mode); it only keeps its
// watch-filter label the Cluster's, so moving a Cluster to another shard moves its
// ControlPlaneEtcd too.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(cluster))
	if !cluster.DeletionTimestamp.IsZero() || annotations.HasPaused(cluster) || cluster.Spec.Paused != nil && *cluster.Spec.Paused {
		return ctrl.Result{}, nil
	}
	if _, ok := DefaultFor(cluster); !ok {
		return ctrl.Result{}, nil
	}
	// Note: a cached read first, so the Cluster's many updates cost no write each. Any
	// ControlPlaneEtcd that names the Cluster counts, whatever its name: a person may have made
	// one, and a default next to it would be a second removal flow for the same Cluster.
	existing, err := ControlPlaneEtcdOf(ctx, r.Client, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	if existing != nil {
		return ctrl.Result{}, r.syncWatchLabel(ctx, cluster, existing)
	}
	facts, err := r.controlPlaneFacts(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	d, wait := DefaultWith(cluster, facts)
	if wait != "" {
		// Note: not watched (the control-plane kind may not be installed when the manager
		// starts), so looked at again after a while.
		log.V(2).Info("Not creating a ControlPlaneEtcd yet", "why", wait)
		return ctrl.Result{RequeueAfter: controlPlaneWaitInterval}, nil
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

// syncWatchLabel gives the ControlPlaneEtcd the Cluster's cluster.x-k8s.io/watch-filter label (or
// none, as the Cluster), writing only when they differ.
func (r *Reconciler) syncWatchLabel(ctx context.Context, cluster *clusterv1.Cluster, cpe *v1alpha1.ControlPlaneEtcd) error {
	want, has := cluster.Labels[clusterv1.WatchLabel]
	got, had := cpe.Labels[clusterv1.WatchLabel]
	if want == got && has == had {
		return nil
	}
	before := cpe.DeepCopy()
	if has {
		if cpe.Labels == nil {
			cpe.Labels = map[string]string{}
		}
		cpe.Labels[clusterv1.WatchLabel] = want
	} else {
		delete(cpe.Labels, clusterv1.WatchLabel)
	}
	if err := r.Client.Patch(ctx, cpe, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to set label %s of ControlPlaneEtcd %s: %w", clusterv1.WatchLabel, klog.KObj(cpe), err)
	}
	ctrl.LoggerFrom(ctx).Info("Set the watch-filter label of ControlPlaneEtcd to the Cluster's", "ControlPlaneEtcd", klog.KObj(cpe), "watchFilter", want)
	return nil
}

// externalDefault is what a KubeadmControlPlane Cluster with external etcd gets: its members run
// on no control-plane Machine, so only Observe makes sense (and KCP skips every etcd check, so
// nothing else reports their health).
var externalDefault = DefaultSpec{v1alpha1.BackendExternal, v1alpha1.ModeObserve}

// controlPlaneWaitInterval is how often a Cluster whose KubeadmControlPlane cannot be read yet is
// looked at again: its etcd may be stacked or external, and the ControlPlaneEtcd waits until
// that is known.
const controlPlaneWaitInterval = 5 * time.Second

// DefaultFor is the rule by which a Cluster gets a ControlPlaneEtcd without anyone creating one:
// its control-plane kind has a default and it did not opt out with v1alpha1.OptOutAnnotation set to
// "true" (any other value, "false" included, opts nothing out, as for every other annotation of
// etcd-adapter).
// The Machine hook webhook asks the same rule for a Cluster whose ControlPlaneEtcd does not exist
// yet, so the two never disagree about which Clusters are managed. The mode it gives is the
// kind's; the backend of a KubeadmControlPlane Cluster is then chosen by DefaultWith, in the same
// mode (Observe) whichever its etcd.
func DefaultFor(cluster *clusterv1.Cluster) (DefaultSpec, bool) {
	if cluster.Annotations[v1alpha1.OptOutAnnotation] == v1alpha1.AnnotationTrue {
		return DefaultSpec{}, false
	}
	d, ok := Defaults[cluster.Spec.ControlPlaneRef.Kind]
	return d, ok
}

// ControlPlaneFacts are what a Cluster's default depends on beyond its control-plane kind, read
// from its control-plane object.
type ControlPlaneFacts struct {
	// Read is true when the control-plane object was read; false while it does not exist (or its
	// kind is not installed).
	Read bool
	// ExternalEtcd is true for a KubeadmControlPlane with
	// spec.kubeadmConfigSpec.clusterConfiguration.etcd.external.
	ExternalEtcd bool
	// EtcdadmCluster is true when the Cluster owns an EtcdadmCluster (backends.FindEtcdadmCluster):
	// its etcd runs on the etcdadm provider's etcd Machines.
	EtcdadmCluster bool
	// EmbeddedRemoval is true when the control-plane object carries hook.EmbeddedRemovalAnnotation:
	// its provider removes etcd members itself.
	EmbeddedRemoval bool
}

// DefaultWith is the ControlPlaneEtcd a Cluster with a default (DefaultFor) gets, given its
// control plane: mode Observe when its provider removes members itself (EmbeddedRemoval); a
// Cluster that owns an EtcdadmCluster, or whose KubeadmControlPlane has external
// etcd, gets backend external in Observe; any other KubeadmControlPlane backend kubeadm. A KubeadmControlPlane that cannot be read yet gives
// no default, and wait says why: a kubeadm ControlPlaneEtcd for an external etcd would report
// every member unreachable, and the creation controller never changes the spec of one it made.
// It is pure.
func DefaultWith(cluster *clusterv1.Cluster, cp ControlPlaneFacts) (d DefaultSpec, wait string) {
	d, _ = DefaultFor(cluster)
	if cp.EmbeddedRemoval {
		// Note: the provider removes members; a second remover would race it, and its hook
		// would wait for ours while ours waited for it.
		d.Mode = v1alpha1.ModeObserve
	}
	if cp.EtcdadmCluster {
		return externalDefault, ""
	}
	ref := cluster.Spec.ControlPlaneRef
	if ref.Kind != backends.KubeadmControlPlaneKind {
		return d, ""
	}
	switch {
	case !cp.Read:
		return DefaultSpec{}, fmt.Sprintf("KubeadmControlPlane %s does not exist yet (or its kind is not installed), so whether its etcd is stacked or external is not known", ref.Name)
	case cp.ExternalEtcd:
		return externalDefault, ""
	}
	return d, ""
}

// controlPlaneFacts looks for an EtcdadmCluster the Cluster owns, then reads the Cluster's
// control-plane object (one of backends.ControlPlaneKinds), both through the manager's cache
// (Cluster API's client options extend it to unstructured objects): the annotation of a provider
// that removes members itself, and a KubeadmControlPlane's etcd. A K3s or RKE2 control plane not
// readable yet gets its kind's default (DefaultWith waits only for a KubeadmControlPlane); the
// ControlPlaneEtcd controller observes only once the annotation shows.
func (r *Reconciler) controlPlaneFacts(ctx context.Context, cluster *clusterv1.Cluster) (ControlPlaneFacts, error) {
	ec, err := backends.FindEtcdadmCluster(ctx, r.Client, r.Client.RESTMapper(), cluster)
	switch {
	case errors.Is(err, etcd.ErrInvalidInput):
		// Note: a Cluster that owns two EtcdadmClusters has external etcd either way; its
		// ControlPlaneEtcd reports which ones, and observes neither.
		return ControlPlaneFacts{Read: true, EtcdadmCluster: true}, nil
	case err != nil:
		return ControlPlaneFacts{}, err
	case ec != nil:
		return ControlPlaneFacts{Read: true, EtcdadmCluster: true}, nil
	}
	if cluster.Spec.ControlPlaneRef.Kind != backends.KubeadmControlPlaneKind {
		// Note: only the metadata, so the cache keeps a metadata informer for these kinds, as the
		// ControlPlaneEtcd controller's reads do.
		obj := &metav1.PartialObjectMetadata{}
		found, err := backends.GetControlPlane(ctx, r.Client, r.Client.RESTMapper(), cluster, obj)
		if err != nil || !found {
			return ControlPlaneFacts{}, err
		}
		_, embedded, _ := hook.EmbeddedRemovalHookOf(obj.Annotations)
		return ControlPlaneFacts{Read: true, EmbeddedRemoval: embedded}, nil
	}
	obj, err := backends.ReadControlPlane(ctx, r.Client, r.Client.RESTMapper(), cluster)
	if err != nil || obj == nil {
		return ControlPlaneFacts{}, err
	}
	_, embedded, _ := hook.EmbeddedRemovalHookOf(obj.GetAnnotations())
	// Note: an external etcd whose endpoints are unusable is still external; its
	// ControlPlaneEtcd reports why they are.
	kcp, _ := backends.KubeadmEtcdOf(obj)
	return ControlPlaneFacts{Read: true, ExternalEtcd: kcp.External, EmbeddedRemoval: embedded}, nil
}

// newControlPlaneEtcd builds the Cluster's ControlPlaneEtcd. It carries the Cluster's
// cluster.x-k8s.io/watch-filter label, so a manager that shares a fleet by --watch-filter (and
// any label selector on ControlPlaneEtcds) sees it with its Cluster.
func newControlPlaneEtcd(cluster *clusterv1.Cluster, d DefaultSpec) *v1alpha1.ControlPlaneEtcd {
	labels := map[string]string{clusterv1.ClusterNameLabel: cluster.Name}
	if v, ok := cluster.Labels[clusterv1.WatchLabel]; ok {
		labels[clusterv1.WatchLabel] = v
	}
	return &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Name, Labels: labels},
		Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: cluster.Name, Backend: d.Backend, Mode: d.Mode},
	}
}
