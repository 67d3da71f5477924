package controlplaneetcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
)

// management is a real kube-apiserver with Cluster API's and etcd-adapter's CRDs, and a manager
// whose cache serves the Reconciler's reads (with the index of ControlPlaneEtcds by Cluster, as
// setup.Setup adds it). No controller runs in it: the tests call Reconcile themselves.
type management struct {
	apiServer *env.APIServer
	// direct writes and reads uncached.
	direct client.Client
	// cached is the manager's client, as the Reconciler gets it.
	cached client.Client
	// apiReader is the manager's uncached reader.
	apiReader client.Reader
	// events is the manager's recorder: it writes Events to the apiserver, as in production.
	events record.EventRecorder
	stop   context.CancelFunc
}

var (
	mgmtOnce sync.Once
	mgmt     *management
	mgmtErr  error
)

// TestMain stops the management cluster if a test started it. It is started on first use, so
// the tests that need none (most of this package) do not wait for it.
func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	code := m.Run()
	if mgmt != nil {
		mgmt.stop()
		if err := mgmt.apiServer.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "failed to stop the apiserver: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// managementCluster starts the management cluster once per test process.
func managementCluster(t *testing.T) *management {
	t.Helper()
	mgmtOnce.Do(func() { mgmt, mgmtErr = startManagement() })
	if mgmtErr != nil {
		t.Fatalf("failed to start the management cluster: %v", mgmtErr)
	}
	return mgmt
}

func startManagement() (*management, error) {
	crdDir, err := capi.CoreCRDDir()
	if err != nil {
		return nil, err
	}
	scheme := env.Scheme()
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	apiServer, err := env.StartAPIServer(env.APIServerOptions{
		Scheme:            scheme,
		CRDDirectoryPaths: []string{crdDir, filepath.Join("..", "..", "..", "config", "crd", "bases")},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(apiServer.Config, capi.ManagerOptions(scheme))
	if err == nil {
		err = creation.IndexByClusterName(ctx, mgr.GetFieldIndexer())
	}
	if err != nil {
		cancel()
		return nil, errors.Join(fmt.Errorf("failed to set up the manager: %w", err), apiServer.Stop())
	}
	go func() { _ = mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, errors.Join(errors.New("the manager's cache did not sync"), apiServer.Stop())
	}
	return &management{apiServer: apiServer, direct: apiServer.Client, cached: mgr.GetClient(), apiReader: mgr.GetAPIReader(),
		events: mgr.GetEventRecorderFor("etcd-adapter-controlplaneetcd"), stop: cancel}, nil //nolint:staticcheck // the recorder the controller uses (controller.go)
}
