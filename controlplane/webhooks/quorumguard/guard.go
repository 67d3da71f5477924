package quorumguard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
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
const Path = "/validate-cluster-x-k8s-io-v1beta2-machine-etcd-quorum"

// DefaultObserveTimeout bounds the observation the guard makes per request; it stays well
// inside the apiserver's webhook timeout (10 s by default).
const DefaultObserveTimeout = 5 * time.Second

// Note: sideEffects=NoneOnDryRun, since the guard records Events on the Machine and the
// ControlPlaneEtcd, except for a dry-run request (kubectl delete --dry-run=server).
//
// +kubebuilder:webhook:path=/validate-cluster-x-k8s-io-v1beta2-machine-etcd-quorum,mutating=false,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups=cluster.x-k8s.io,resources=machines,verbs=delete,versions=v1beta2,name=etcd-quorum.etcdadapter.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10

// backendsFor hands out the etcd.Cluster of a Cluster; backends.Registry is the one in use.
type backendsFor interface {
	For(ctx context.Context, cluster *clusterv1.Cluster, backend v1alpha1.Backend) (etcd.Cluster, error)
}

var _ backendsFor = &backends.Registry{}

// Guard is the quorum guard.
type Guard struct {
	// Client reads the management cluster.
	Client client.Reader
	// Backends hands out each Cluster's etcd.Cluster (a *backends.Registry).
	Backends backendsFor
	// Recorder records an Event for every refusal and every deletion let through with a warning,
	// on the Machine and on the ControlPlaneEtcd; nil means the manager's recorder.
	Recorder record.EventRecorder
	// ObserveTimeout bounds one observation; zero means DefaultObserveTimeout.
	ObserveTimeout time.Duration

	decoder admission.Decoder
}

// SetupWithManager registers the guard on the manager's webhook server.
func (g *Guard) SetupWithManager(mgr ctrl.Manager) error {
	if g.Client == nil || g.Backends == nil {
		return errors.New("failed to set up the quorum guard: Client and Backends are required")
	}
	if g.Recorder == nil {
		g.Recorder = mgr.GetEventRecorderFor("etcd-adapter-quorum-guard")
	}
	g.decoder = admission.NewDecoder(mgr.GetScheme())
	mgr.GetWebhookServer().Register(Path, &webhook.Admission{Handler: g})
	return nil
}

// outcome is the guard's answer to one request and the Event that goes with it.
type outcome struct {
	resp admission.Response
	// cpe is the Cluster's ControlPlaneEtcd, when the guard found one.
	cpe *v1alpha1.ControlPlaneEtcd
	// eventReason is empty when the answer deserves no Event (a plain allow). The Event's message
	// is the denial's message or the warning.
	eventReason string
}

func allowed() outcome { return outcome{resp: admission.Allowed("")} }

// allowedWithWarning lets the deletion through and says why it may be unsafe, to the client and
// as a Warning Event.
func allowedWithWarning(cpe *v1alpha1.ControlPlaneEtcd, reason, warning string) outcome {
	return outcome{resp: admission.Allowed("").WithWarnings(warning), cpe: cpe, eventReason: reason}
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
	out := g.decide(ctx, m)
	dryRun := req.DryRun != nil && *req.DryRun
	ctrl.LoggerFrom(ctx).V(2).Info("Quorum guard", "Machine", klog.KObj(m), "allowed", out.resp.Allowed, "warnings", out.resp.Warnings, "dryRun", dryRun)
	if !dryRun {
		g.record(m, out)
	}
	return out.resp
}

// record puts the outcome's Event on the Machine and on the ControlPlaneEtcd, so `kubectl
// describe` of either shows who was refused or let through, and why.
func (g *Guard) record(m *clusterv1.Machine, out outcome) {
	if out.eventReason == "" || g.Recorder == nil {
		return
	}
	msg := strings.Join(out.resp.Warnings, "; ")
	if !out.resp.Allowed && out.resp.Result != nil {
		msg = out.resp.Result.Message
	}
	g.Recorder.Event(m, corev1.EventTypeWarning, out.eventReason, msg)
	if out.cpe != nil {
		g.Recorder.Event(out.cpe, corev1.EventTypeWarning, out.eventReason, msg)
	}
}

func (g *Guard) decide(ctx context.Context, m *clusterv1.Machine) outcome {
	if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; !cp || !m.DeletionTimestamp.IsZero() {
		return allowed()
	}
	cluster := &clusterv1.Cluster{}
	if err := g.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, cluster); err != nil {
		return allowed()
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return allowed()
	}
	cpe, err := creation.ControlPlaneEtcdOf(ctx, g.Client, cluster)
	if err != nil || cpe == nil {
		return allowed()
	}
	if _, skip := m.Annotations[v1alpha1.SkipQuorumGuardAnnotation]; skip {
		return allowedWithWarning(cpe, v1alpha1.EventQuorumGuardSkipped,
			fmt.Sprintf("etcd quorum guard skipped for Machine %s by annotation %s", m.Name, v1alpha1.SkipQuorumGuardAnnotation))
	}
	return g.project(ctx, cluster, cpe, m)
}

// project observes etcd and asks the quorum projection about every member the Machine's Node
// hosts.
func (g *Guard) project(ctx context.Context, cluster *clusterv1.Cluster, cpe *v1alpha1.ControlPlaneEtcd, m *clusterv1.Machine) outcome {
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
		return allowedWithWarning(cpe, v1alpha1.EventDeletionAllowedHealthUnknown,
			fmt.Sprintf("etcd health of Cluster %s is unknown (%v); deleting Machine %s may lose etcd quorum", cluster.Name, err, m.Name))
	}
	now := time.Now()
	verdict := etcd.CanRemediate(snap, now, etcd.MachineFacts(m))
	switch {
	case verdict.Allowed:
		return allowed()
	case verdict.Reason == v1alpha1.MemberRemovalHealthUnknownReason:
		return allowedWithWarning(cpe, v1alpha1.EventDeletionAllowedHealthUnknown,
			fmt.Sprintf("etcd health of Cluster %s is unknown: %s", cluster.Name, verdict.Message))
	case verdict.Reason == v1alpha1.MemberRemovalLastMemberReason:
		return allowedWithWarning(cpe, v1alpha1.EventDeletionAllowedLastMember,
			fmt.Sprintf("Machine %s hosts the last etcd member of Cluster %s: %s", m.Name, cluster.Name, verdict.Message))
	}
	return outcome{cpe: cpe, eventReason: v1alpha1.EventDeletionRefused, resp: admission.Denied(fmt.Sprintf(
		"deleting Machine %s would lose etcd quorum of Cluster %s (%s): %s; members not healthy: %s. Fix them first, or set annotation %s on the Machine to delete it anyway",
		m.Name, cluster.Name, verdict.Reason, verdict.Message, unhealthyMembers(snap, now), v1alpha1.SkipQuorumGuardAnnotation))}
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
