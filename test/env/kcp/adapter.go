package kcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/etcd-adapter/etcd-adapter/controlplane/setup"
	"github.com/etcd-adapter/etcd-adapter/controlplane/webhooks/quorumguard"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
)

// Identities the management apiserver sees in admission requests: the in-process controllers
// and a person all connect with the test's administrator certificate, so KCP and the person
// impersonate names of their own, and the quorum guard's decisions say who asked.
const (
	// KCPUser is the user KubeadmControlPlane's manager acts as: the ServiceAccount a
	// clusterctl-installed KCP runs as.
	KCPUser = "system:serviceaccount:capi-kubeadm-control-plane-system:capi-kubeadm-control-plane-manager"
	// PersonUser is the user of PersonClient, a person with kubectl.
	PersonUser = "person@example.com"
)

// adapterCallTimeout bounds one observation by etcd-adapter's controllers: kubeadm asks every
// member through a port-forward, which on a loaded 2-core machine can take several seconds.
const adapterCallTimeout = 20 * time.Second

// GuardDecision is one answer of the quorum guard to a Machine DELETE.
type GuardDecision struct {
	// At is when the guard answered.
	At time.Time
	// User is who asked (KCPUser, PersonUser or the test's administrator).
	User string
	// Machine is the Machine's name.
	Machine string
	// DryRun is true for a server-side dry run.
	DryRun bool
	// Allowed and Message are the answer; Warnings are admission warnings.
	Allowed  bool
	Message  string
	Warnings []string
}

// guardRecorder keeps every decision of the quorum guard.
type guardRecorder struct {
	mu        sync.Mutex
	decisions []GuardDecision
}

func (r *guardRecorder) add(d GuardDecision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decisions = append(r.decisions, d)
}

func (r *guardRecorder) all() []GuardDecision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]GuardDecision(nil), r.decisions...)
}

// recordingHandler wraps the quorum guard's admission handler and records its answers to
// Machine DELETEs; it changes none of them.
type recordingHandler struct {
	next admission.Handler
	rec  *guardRecorder
}

func (h *recordingHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := h.next.Handle(ctx, req)
	if req.Operation == admissionv1.Delete {
		d := GuardDecision{
			At: time.Now(), User: req.UserInfo.Username, Machine: req.Name,
			DryRun: req.DryRun != nil && *req.DryRun, Allowed: resp.Allowed, Warnings: resp.Warnings,
		}
		if resp.Result != nil {
			d.Message = resp.Result.Message
		}
		h.rec.add(d)
	}
	return resp
}

// recordingServer is the manager's webhook server; it wraps the quorum guard's handler in a
// recordingHandler when the guard registers and leaves every other webhook as it is.
type recordingServer struct {
	webhook.Server
	rec *guardRecorder
}

func (s *recordingServer) Register(path string, hook http.Handler) {
	if a, ok := hook.(*webhook.Admission); ok && path == quorumguard.Path {
		a.Handler = &recordingHandler{next: a.Handler, rec: s.rec}
	}
	s.Server.Register(path, hook)
}

// repoRoot is the repository root, found from this file's place in it.
func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("failed to find the repository root: no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", ".."), nil
}

// adapterInstall returns etcd-adapter's CRD directory and webhook configurations (config/crd/bases
// and config/webhook, as `make generate` writes them).
func adapterInstall() (crdDir string, webhooks *envtest.WebhookInstallOptions, err error) {
	root, err := repoRoot()
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(root, "config", "crd", "bases"),
		&envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook")}}, nil
}

// startAdapterManager runs etcd-adapter as its manager binary does (controlplane/setup.Setup with
// the webhooks), in a manager of its own, serving the webhooks where the management apiserver
// was told to call them.
func startAdapterManager(ctx context.Context, cfg *rest.Config, wio *envtest.WebhookInstallOptions, rec *guardRecorder) (*runningManager, error) {
	opts := capi.ManagerOptions(Scheme())
	// Note: Machines are cached as the etcd-adapter binary caches them (worker Machines trimmed).
	opts.Cache.ByObject[&clusterv1.Machine{}] = setup.MachineCacheOptions()
	opts.WebhookServer = &recordingServer{
		Server: webhook.NewServer(webhook.Options{Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir}),
		rec:    rec,
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("failed to create the etcd-adapter manager: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	cc, err := capi.SetupClusterCache(ctx, mgr)
	if err == nil {
		_, err = setup.Setup(ctx, mgr, setup.Options{ClusterCache: cc, Webhooks: true, CallTimeout: adapterCallTimeout})
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("failed to set up etcd-adapter: %w", err)
	}
	m, err := start(ctx, cancel, mgr)
	if err != nil {
		return nil, err
	}
	checker := mgr.GetWebhookServer().StartedChecker()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return checker(&http.Request{}) == nil, nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("etcd-adapter's webhook server did not start: %w", err), m.stop())
	}
	return m, nil
}

// impersonating returns cfg acting as user, in system:masters like the real managers' broad
// RBAC (the test's administrator certificate may impersonate).
func impersonating(cfg *rest.Config, user string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	return c
}
