package quorumguard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Path is where the webhook is served.
const Path = "/validate-cluster-x-k8s-io-v1beta2-machine-etcd-quorum"

// DefaultObserveTimeout bounds the observation the guard makes per request; it stays well
// inside the apiserver's webhook timeout (10 s by default).
const DefaultObserveTimeout = 5 * time.Second

// +kubebuilder:webhook:path=/validate-cluster-x-k8s-io-v1beta2-machine-etcd-quorum,mutating=false,failurePolicy=ignore,sideEffects=None,groups=cluster.x-k8s.io,resources=machines,verbs=delete,versions=v1beta2,name=etcd-quorum.etcdadapter.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10

// Guard is the quorum guard.
type Guard struct {
	// Client reads the management cluster.
	Client client.Reader
	// Backends hands out each Cluster's etcd.Cluster.
	Backends *backends.Registry
	// ObserveTimeout bounds one observation; zero means DefaultObserveTimeout.
	ObserveTimeout time.Duration

	decoder admission.Decoder
}

// SetupWithManager registers the guard on the manager's webhook server.
func (g *Guard) SetupWithManager(mgr ctrl.Manager) error {
	if g.Client == nil || g.Backends == nil {
		return errors.New("failed to set up the quorum guard: Client and Backends are required")
	}
	g.decoder = admission.NewDecoder(mgr.GetScheme())
	mgr.GetWebhookServer().Register(Path, &webhook.Admission{Handler: g})
	return nil
}

// Handle decides one admission request.
func (g *Guard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("")
	}
	m := &clusterv1.Machine{}
	if err := g.decoder.DecodeRaw(req.OldObject, m); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("failed to decode the Machine: %w", err))
	}
	resp := g.decide(ctx, m)
	ctrl.LoggerFrom(ctx).V(2).Info("Quorum guard", "Machine", klog.KObj(m), "allowed", resp.Allowed, "warnings", resp.Warnings)
	return resp
}

func (g *Guard) decide(ctx context.Context, m *clusterv1.Machine) admission.Response {
	if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; !cp || !m.DeletionTimestamp.IsZero() {
		return admission.Allowed("")
	}
	if _, skip := m.Annotations[v1alpha1.SkipQuorumGuardAnnotation]; skip {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("etcd quorum guard skipped by annotation %s", v1alpha1.SkipQuorumGuardAnnotation))
	}
	cluster := &clusterv1.Cluster{}
	if err := g.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, cluster); err != nil {
		return admission.Allowed("")
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return admission.Allowed("")
	}
	cpe, err := g.controlPlaneEtcd(ctx, cluster)
	if err != nil || cpe == nil {
		return admission.Allowed("")
	}
	return g.project(ctx, cluster, cpe, m)
}

func (g *Guard) controlPlaneEtcd(ctx context.Context, cluster *clusterv1.Cluster) (*v1alpha1.ControlPlaneEtcd, error) {
	list := &v1alpha1.ControlPlaneEtcdList{}
	if err := g.Client.List(ctx, list, client.InNamespace(cluster.Namespace)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].Spec.ClusterName == cluster.Name {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// project observes etcd and asks the quorum projection about every member the Machine's Node
// hosts.
func (g *Guard) project(ctx context.Context, cluster *clusterv1.Cluster, cpe *v1alpha1.ControlPlaneEtcd, m *clusterv1.Machine) admission.Response {
	timeout := g.ObserveTimeout
	if timeout <= 0 {
		timeout = DefaultObserveTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var snap *etcd.Snapshot
	backend, err := g.Backends.For(ctx, cluster, cpe.Spec.Backend)
	if err == nil {
		snap, err = backend.Observe(ctx)
	}
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("etcd health of Cluster %s is unknown (%v); deleting Machine %s may lose etcd quorum", cluster.Name, err, m.Name))
	}
	now := time.Now()
	verdict := etcd.CanRemediate(snap, now, etcd.MachineFacts(m))
	switch {
	case verdict.Allowed:
		return admission.Allowed("")
	case verdict.Reason == v1alpha1.MemberRemovalHealthUnknownReason:
		return admission.Allowed("").WithWarnings(fmt.Sprintf("etcd health of Cluster %s is unknown: %s", cluster.Name, verdict.Message))
	case verdict.Reason == v1alpha1.MemberRemovalLastMemberReason:
		return admission.Allowed("").WithWarnings(fmt.Sprintf("Machine %s hosts the last etcd member of Cluster %s: %s", m.Name, cluster.Name, verdict.Message))
	}
	return admission.Denied(fmt.Sprintf("deleting Machine %s would lose etcd quorum of Cluster %s (%s): %s; members not healthy: %s. Fix them first, or set annotation %s on the Machine to delete it anyway",
		m.Name, cluster.Name, verdict.Reason, verdict.Message, unhealthyMembers(snap, now), v1alpha1.SkipQuorumGuardAnnotation))
}

func unhealthyMembers(s *etcd.Snapshot, now time.Time) string {
	var out []string
	for _, mh := range etcd.AssessMembers(s, now) {
		if mh.Health != etcd.Healthy {
			out = append(out, fmt.Sprintf("%s (%s: %s)", mh.Member, mh.Health, mh.Message))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
