package quorumguard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/record"
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

// DefaultObserveTimeout bounds the observation the guard makes per request; with
// DefaultTurnTimeout it stays inside the webhook's 10 s timeout.
const DefaultObserveTimeout = 5 * time.Second

// DefaultTurnTimeout bounds how long a request waits for the other requests of the same Cluster
// to be decided (admissions of one Cluster are decided one at a time). A request that waits
// longer is refused ("try again"), not left to the apiserver's timeout: the webhook's
// failurePolicy is Ignore, so a request that times out would be let through unchecked.
const DefaultTurnTimeout = 3 * time.Second

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
	// Client reads the management cluster (the manager's cached client).
	Client client.Reader
	// APIReader reads the Cluster's control-plane Machines and its admission record (a Lease)
	// uncached, so the deletions under way are seen as soon as the apiserver wrote them; nil
	// means the manager's APIReader.
	APIReader client.Reader
	// Writer writes the admission records; nil means the manager's client.
	Writer client.Writer
	// RESTMapper maps the Cluster's spec.controlPlaneRef to a version; nil means the manager's.
	RESTMapper meta.RESTMapper
	// Backends hands out each Cluster's etcd.Cluster (a *backends.Registry).
	Backends backendsFor
	// Recorder records an Event for every refusal and every deletion let through with a warning,
	// on the Machine and on the ControlPlaneEtcd; nil means the manager's recorder.
	Recorder record.EventRecorder
	// ObserveTimeout bounds one observation; zero means DefaultObserveTimeout.
	ObserveTimeout time.Duration
	// TurnTimeout bounds the wait for other admissions of the same Cluster; zero means
	// DefaultTurnTimeout.
	TurnTimeout time.Duration

	decoder admission.Decoder

	mu       sync.Mutex
	clusters map[client.ObjectKey]*clusterTurn
}

// SetupWithManager registers the guard on the manager's webhook server.
func (g *Guard) SetupWithManager(mgr ctrl.Manager) error {
	if g.Client == nil || g.Backends == nil {
		return errors.New("failed to set up the quorum guard: Client and Backends are required")
	}
	if g.APIReader == nil {
		g.APIReader = mgr.GetAPIReader()
	}
	if g.Writer == nil {
		g.Writer = mgr.GetClient()
	}
	if g.RESTMapper == nil {
		g.RESTMapper = mgr.GetRESTMapper()
	}
	if g.Recorder == nil {
		g.Recorder = mgr.GetEventRecorderFor("etcd-adapter-quorum-guard") //nolint:staticcheck // core/v1 Events, as Cluster API v1.14's controllers record them; GetEventRecorder writes events.k8s.io/v1 Events (other RBAC, other objects for users)
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
	// is eventMessage when set, else the denial's message or the warning.
	eventReason  string
	eventMessage string
	// why says, for the log, why a deletion was let through without a check.
	why string
}

func allowed(why string) outcome { return outcome{resp: admission.Allowed(""), why: why} }

// allowedWithWarning lets the deletion through and says why it may be unsafe, to the client and
// as a Warning Event.
func allowedWithWarning(cpe *v1alpha1.ControlPlaneEtcd, reason, warning string) outcome {
	return outcome{resp: admission.Allowed("").WithWarnings(warning), cpe: cpe, eventReason: reason}
}

// allowedWithEvent lets the deletion through without a warning to the client (clusterctl move
// deletes every Machine so) and records msg as a Warning Event: the guard was not asked.
func allowedWithEvent(cpe *v1alpha1.ControlPlaneEtcd, reason, msg string) outcome {
	return outcome{resp: admission.Allowed(""), cpe: cpe, eventReason: reason, eventMessage: msg, why: msg}
}

func denied(cpe *v1alpha1.ControlPlaneEtcd, reason, msg string) outcome {
	return outcome{resp: admission.Denied(msg), cpe: cpe, eventReason: reason}
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
	dryRun := req.DryRun != nil && *req.DryRun
	out := g.decide(ctx, m, dryRun)
	ctrl.LoggerFrom(ctx).V(2).Info("Quorum guard", "Machine", klog.KObj(m), "allowed", out.resp.Allowed, "why", out.why, "warnings", out.resp.Warnings, "dryRun", dryRun)
	if !dryRun {
		g.record(m, out, req.UserInfo.Username)
	}
	return out.resp
}

// record puts the outcome's Event on the Machine and on the ControlPlaneEtcd, so `kubectl
// describe` of either shows who was refused or let through, and why. The Event names the user
// the apiserver authenticated for the deletion: the Machine does not say who deleted it.
func (g *Guard) record(m *clusterv1.Machine, out outcome, user string) {
	if out.eventReason == "" || g.Recorder == nil {
		return
	}
	msg := strings.Join(out.resp.Warnings, "; ")
	switch {
	case out.eventMessage != "":
		msg = out.eventMessage
	case !out.resp.Allowed && out.resp.Result != nil:
		msg = out.resp.Result.Message
	}
	if user != "" {
		msg = fmt.Sprintf("%s (deletion requested by user %q)", msg, user)
	}
	g.Recorder.Event(m, corev1.EventTypeWarning, out.eventReason, msg)
	if out.cpe != nil {
		g.Recorder.Event(out.cpe, corev1.EventTypeWarning, out.eventReason, msg)
	}
}

// decide lets through a deletion the guard does not check (exemptions.go), and decides any other
// in its Cluster's turn (turn.go), on the quorum projection (projection.go).
func (g *Guard) decide(ctx context.Context, m *clusterv1.Machine, dryRun bool) outcome {
	d, out, checked := g.toCheck(ctx, m)
	if !checked {
		return out
	}
	turn, ok := g.takeTurn(ctx, client.ObjectKeyFromObject(d.cluster))
	if !ok {
		if d.skip {
			return allowedWithWarning(d.cpe, v1alpha1.EventQuorumGuardSkipped, skipped(m))
		}
		return outcome{cpe: d.cpe, resp: admission.Denied(fmt.Sprintf(
			"another deletion of a control-plane Machine of Cluster %s is being checked by the etcd quorum guard; try again", d.cluster.Name))}
	}
	defer g.endTurn(turn)
	return g.decideInTurn(ctx, d, dryRun)
}
