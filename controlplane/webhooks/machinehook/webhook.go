package machinehook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Path is where the webhook is served.
const Path = "/mutate-cluster-x-k8s-io-v1beta2-machine-etcd-hook"

// Important! failurePolicy=fail: a Manage-mode control-plane Machine must never be created
// without the hook, since a deletion before the controller's first pass would remove its member
// with no drain first. The price is that while etcd-adapter's webhook is down no control-plane
// Machine can be created (in either mode; Cluster API's own Machine webhooks fail the same way
// when its manager is down). The objectSelector keeps every other Machine (workers) away from
// the webhook, so they never depend on it. The matchCondition keeps Machines bootstrapped by a
// KubeadmConfig (KubeadmControlPlane's) away from it too: their Clusters get a ControlPlaneEtcd in
// Observe mode, where the webhook adds nothing, so an etcd-adapter outage must not block KCP
// scale-up, rollout or remediation. The price: a kubeadm Cluster switched to Manage gets the hook
// on a new Machine from the ControlPlaneEtcd controller's next pass (ensureHooks), not at creation.
// The has() guards keep the expression from erroring (an error would apply failurePolicy) on a
// Machine with no configRef (spec.bootstrap.dataSecretName only): such a Machine reaches the
// webhook. sideEffects=None: the webhook only mutates the request's object.
//
// +kubebuilder:webhook:path=/mutate-cluster-x-k8s-io-v1beta2-machine-etcd-hook,mutating=true,failurePolicy=fail,sideEffects=None,groups=cluster.x-k8s.io,resources=machines,verbs=create,versions=v1beta2,name=etcd-hook.etcdadapter.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10,reinvocationPolicy=Never,patch=`{"objectSelector":{"matchExpressions":[{"key":"cluster.x-k8s.io/control-plane","operator":"Exists"}]},"matchConditions":[{"name":"not-kubeadm-bootstrapped","expression":"!(has(object.spec.bootstrap) && has(object.spec.bootstrap.configRef) && has(object.spec.bootstrap.configRef.kind) && object.spec.bootstrap.configRef.kind == 'KubeadmConfig')"}]}`
//
// The etcd Machines of an EtcdadmCluster (label cluster.x-k8s.io/etcd-cluster, set by the etcdadm
// controller, aws/etcdadm-controller controllers/helpers.go generateMachine) reach the webhook
// through a second entry: one objectSelector cannot select either label. They get the hook only
// when their Cluster's ControlPlaneEtcd is in mode Manage (see decideEtcdMachine). Its
// failurePolicy is Ignore: the ControlPlaneEtcd an EtcdadmCluster's Cluster gets by default is in
// mode Observe, whose etcd Machines must not wait on etcd-adapter, and an etcd Machine has no
// Node to drain, so one created during an outage gets the hook from the controller's next pass
// (ensureHooks) and a deletion before that is still checked by the quorum guard.
//
// +kubebuilder:webhook:path=/mutate-cluster-x-k8s-io-v1beta2-machine-etcd-hook,mutating=true,failurePolicy=ignore,sideEffects=None,groups=cluster.x-k8s.io,resources=machines,verbs=create,versions=v1beta2,name=etcd-machine-hook.etcdadapter.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10,reinvocationPolicy=Never,patch=`{"objectSelector":{"matchExpressions":[{"key":"cluster.x-k8s.io/etcd-cluster","operator":"Exists"},{"key":"cluster.x-k8s.io/control-plane","operator":"DoesNotExist"}]}}`

// Webhook puts the pre-terminate hook on new control-plane Machines of managed Clusters, and on
// new etcd Machines of an EtcdadmCluster whose Cluster's ControlPlaneEtcd is in mode Manage.
type Webhook struct {
	// Client reads Clusters and ControlPlaneEtcds. Give it an uncached reader (the manager's
	// GetAPIReader()): control-plane Machines are created rarely, and a cache would not yet hold a
	// Cluster created moments before its first Machine, nor any Cluster of another shard.
	Client client.Reader
	// WatchFilter and Namespace are the manager's --watch-filter and --namespace: they say which
	// Clusters this manager handles (see decide).
	WatchFilter string
	Namespace   string

	decoder admission.Decoder
	mapper  meta.RESTMapper
}

// SetupWithManager registers the webhook on the manager's webhook server.
func (w *Webhook) SetupWithManager(mgr ctrl.Manager) error {
	if w.Client == nil {
		return errors.New("failed to set up the Machine hook webhook: Client is required")
	}
	w.decoder = admission.NewDecoder(mgr.GetScheme())
	w.mapper = mgr.GetRESTMapper()
	mgr.GetWebhookServer().Register(Path, &webhook.Admission{Handler: w})
	return nil
}

// Handle answers one admission request.
func (w *Webhook) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	m := &clusterv1.Machine{}
	if err := w.decoder.DecodeRaw(req.Object, m); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("failed to decode the Machine: %w", err))
	}
	log := ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(m))
	_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
	_, etcdLabel := m.Labels[backends.EtcdClusterLabel]
	etcdMachine := !cp && etcdLabel
	if (!cp && !etcdMachine) || m.Annotations[v1alpha1.PreTerminateHookAnnotation] != "" {
		return admission.Allowed("")
	}
	cluster, resp := w.cluster(ctx, m)
	if cluster == nil {
		log.V(2).Info("Machine hook not added", "warnings", resp.Warnings, "allowed", resp.Allowed)
		return resp
	}
	cpe, err := creation.LiveControlPlaneEtcdOf(ctx, w.Client, cluster)
	if err != nil {
		// Note: deny rather than let the Machine through without a hook it may need; the
		// creator (KThreesControlPlane, a MachineSet, kubectl) retries.
		return admission.Errored(http.StatusInternalServerError, err)
	}
	var etcdFacts *etcdMachineFacts
	if etcdMachine {
		if etcdFacts, resp = w.etcdMachineFacts(ctx, m, cluster); etcdFacts == nil {
			return resp
		}
	}
	embedded := !etcdMachine && w.embedsRemoval(ctx, cluster)
	d := decide(cluster, cpe, w.handles(cluster), etcdFacts, embedded)
	log.V(2).Info("Machine hook decision", "Cluster", klog.KObj(cluster), "addHook", d.addHook, "why", d.why)
	switch {
	case d.addHook:
		return withHook(req)
	case d.warning != "":
		return admission.Allowed("").WithWarnings(d.warning)
	}
	return admission.Allowed("")
}

// etcdMachineFacts reads which EtcdadmCluster the etcd Machine's Cluster owns, or returns the
// response for a Machine whose Cluster's EtcdadmCluster cannot be told: two owned is bad input,
// let through without the hook and with a warning (the ControlPlaneEtcd's status says the same);
// a failed read is an error, which the entry's failurePolicy (Ignore) lets through, and the
// controller adds the hook on its next pass.
func (w *Webhook) etcdMachineFacts(ctx context.Context, m *clusterv1.Machine, cluster *clusterv1.Cluster) (*etcdMachineFacts, admission.Response) {
	owned, err := backends.FindEtcdadmCluster(ctx, w.Client, w.mapper, cluster)
	switch {
	case errors.Is(err, etcd.ErrInvalidInput):
		return nil, admission.Allowed("").WithWarnings(fmt.Sprintf("etcd Machine %s: %v; etcd-adapter did not add its pre-terminate hook", m.Name, err))
	case err != nil:
		return nil, admission.Errored(http.StatusInternalServerError, fmt.Errorf("failed to find the EtcdadmCluster of Cluster %s: %w", klog.KObj(cluster), err))
	}
	facts := &etcdMachineFacts{etcdCluster: m.Labels[backends.EtcdClusterLabel]}
	if owned != nil {
		facts.owned = owned.GetName()
	}
	return facts, admission.Response{}
}

// handles says whether this manager handles the Cluster, as its cache selects Clusters: in its
// namespace and, with a watch filter, labelled cluster.x-k8s.io/watch-filter=<filter>.
func (w *Webhook) handles(cluster *clusterv1.Cluster) bool {
	if w.Namespace != "" && cluster.Namespace != w.Namespace {
		return false
	}
	return w.WatchFilter == "" || cluster.Labels[clusterv1.WatchLabel] == w.WatchFilter
}

// cluster returns the Machine's Cluster, or the response for a Machine whose Cluster is not
// known. Such a Machine is let through without the hook and with a warning, not refused: Cluster
// API lets a Machine exist before its Cluster (tools that apply a whole Cluster at once do not
// order the objects), and the ControlPlaneEtcd controller adds the hook once the Cluster exists.
func (w *Webhook) cluster(ctx context.Context, m *clusterv1.Machine) (*clusterv1.Cluster, admission.Response) {
	name := m.Spec.ClusterName
	if name == "" {
		name = m.Labels[clusterv1.ClusterNameLabel]
	}
	if name == "" {
		return nil, admission.Allowed("").WithWarnings(fmt.Sprintf(
			"control-plane Machine %s names no Cluster (spec.clusterName and label %s are empty); etcd-adapter did not add its pre-terminate hook",
			m.Name, clusterv1.ClusterNameLabel))
	}
	cluster := &clusterv1.Cluster{}
	err := w.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: name}, cluster)
	switch {
	case apierrors.IsNotFound(err):
		return nil, admission.Allowed("").WithWarnings(fmt.Sprintf(
			"Cluster %s of control-plane Machine %s does not exist (yet); etcd-adapter did not add its pre-terminate hook now, and adds it once the Cluster is managed",
			name, m.Name))
	case err != nil:
		return nil, admission.Errored(http.StatusInternalServerError, fmt.Errorf("failed to get Cluster %s: %w", name, err))
	}
	return cluster, admission.Response{}
}

// withHook answers with a patch that adds the hook to the Machine. It edits the request's own
// JSON, not a re-encoded Machine, so the patch holds the annotation and nothing else.
func withHook(req admission.Request) admission.Response {
	obj := map[string]any{}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("failed to decode the Machine: %w", err))
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	annotations, _ := meta["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
		meta["annotations"] = annotations
	}
	annotations[v1alpha1.PreTerminateHookAnnotation] = v1alpha1.PreTerminateHookValue
	raw, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("failed to encode the Machine: %w", err))
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}
