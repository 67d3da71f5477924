package env

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
)

// managerStopTimeout bounds how long Stop waits for the controllers to finish.
const managerStopTimeout = time.Minute

// Management is a management cluster: an APIServer with Cluster API's core v1beta2 CRDs and the
// TestMachine CRD, and a controller-runtime manager running Cluster API's Machine and
// MachineHealthCheck controllers (through a ClusterCache) and the TestMachine reconciler.
//
// The embedded APIServer's Client is uncached; Manager.GetClient() reads from the manager cache.
type Management struct {
	*APIServer

	// Manager runs the controllers; it is already started when StartManagement returns.
	Manager ctrl.Manager
	// ClusterCache holds the connections to registered workload clusters.
	ClusterCache clustercache.ClusterCache

	scheme *runtime.Scheme
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// StartManagement starts a management cluster and its controllers and returns once the manager's
// caches are synced. Call Stop when done, also when a test fails.
func StartManagement(ctx context.Context) (*Management, error) {
	return StartManagementWith(ctx, ManagementOptions{})
}

// ManagementOptions add to what StartManagement installs, for suites that run more controllers
// (in their own manager) against the management cluster.
type ManagementOptions struct {
	// Scheme is used by the clients and the manager; nil means Scheme(). It must hold the types
	// of the extra CRDs a suite uses.
	Scheme *runtime.Scheme
	// CRDDirectoryPaths are installed next to Cluster API's CRDs.
	CRDDirectoryPaths []string
	// CRDs are installed next to Cluster API's CRDs (for example capi.KubeadmCRDs()).
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Webhooks installs admission webhook configurations (see APIServerOptions.Webhooks).
	Webhooks *envtest.WebhookInstallOptions
	// APIServerFlags are kube-apiserver flags (see APIServerOptions.Flags).
	APIServerFlags map[string]string
}

// StartManagementWith is StartManagement with extra CRDs and webhooks installed.
func StartManagementWith(ctx context.Context, opts ManagementOptions) (*Management, error) {
	setLoggerOnce()
	crdDir, err := capi.CoreCRDDir()
	if err != nil {
		return nil, err
	}
	if opts.Scheme == nil {
		opts.Scheme = Scheme()
	}
	s, err := StartAPIServer(APIServerOptions{
		Scheme:            opts.Scheme,
		CRDs:              append([]*apiextensionsv1.CustomResourceDefinition{infra.MachineCRD()}, opts.CRDs...),
		CRDDirectoryPaths: append([]string{crdDir}, opts.CRDDirectoryPaths...),
		Webhooks:          opts.Webhooks,
		Flags:             opts.APIServerFlags,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to start the management apiserver: %w", err)
	}
	m := &Management{APIServer: s, scheme: opts.Scheme}
	if err := m.startManager(ctx); err != nil {
		return nil, errors.Join(err, m.Stop())
	}
	return m, nil
}

func (m *Management) startManager(ctx context.Context) error {
	mgr, err := ctrl.NewManager(m.Config, capi.ManagerOptions(m.scheme))
	if err != nil {
		return fmt.Errorf("failed to create the management manager: %w", err)
	}
	ctx, m.cancel = context.WithCancel(ctx)
	cc, err := capi.Setup(ctx, mgr)
	if err != nil {
		return err
	}
	infraReconciler := &infra.Reconciler{Client: mgr.GetClient()}
	if err := infraReconciler.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 5}); err != nil {
		return err
	}
	m.Manager, m.ClusterCache = mgr, cc
	m.done = make(chan error, 1)
	go func() { m.done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("failed to sync the management manager's cache: %w", context.Cause(ctx))
	}
	return nil
}

// Stop stops the controllers, then the apiserver and etcd. It is safe to call more than once.
func (m *Management) Stop() error {
	m.once.Do(func() { m.err = errors.Join(m.stopManager(), m.APIServer.Stop()) })
	return m.err
}

func (m *Management) stopManager() error {
	if m.cancel == nil {
		return nil
	}
	m.cancel()
	if m.done == nil {
		return nil
	}
	select {
	case err := <-m.done:
		if err != nil {
			return fmt.Errorf("management manager failed: %w", err)
		}
		return nil
	case <-time.After(managerStopTimeout):
		return fmt.Errorf("failed to stop the management manager within %s", managerStopTimeout)
	}
}

var loggerOnce sync.Once

// setLoggerOnce routes controller-runtime's logs to klog (stderr), which `go test` shows for
// failing tests, and silences controller-runtime's "SetLogger was never called" warning.
func setLoggerOnce() {
	loggerOnce.Do(func() { ctrl.SetLogger(klog.Background()) })
}
