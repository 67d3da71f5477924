package fleetbench

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter/manager"
	"github.com/etcd-adapter/etcd-adapter/test/env"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// startManagement starts the management cluster the manager binary watches: Cluster API's CRDs
// and controllers, etcd-adapter's CRDs and webhook configuration (the manager runs with its
// webhooks off, and the fleet creates no object they admit). It stops with tb.
func startManagement(ctx context.Context, tb testing.TB) *env.Management {
	tb.Helper()
	root := filepath.Join("..", "..")
	mgmt, err := env.StartManagementWith(ctx, env.ManagementOptions{
		Scheme:            manager.Scheme(),
		CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases")},
		Webhooks:          &envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook", "manifests.yaml")}},
	})
	if err != nil {
		tb.Fatalf("failed to start the management cluster: %v", err)
	}
	tb.Cleanup(func() {
		if err := mgmt.Stop(); err != nil {
			tb.Errorf("failed to stop the management cluster: %v", err)
		}
	})
	return mgmt
}
