package machinehook

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
)

var apiServer *env.APIServer

// shard is the webhook's --watch-filter: Clusters of the tests carry it unless a test is about
// another shard's Cluster.
const shard = "shard-a"

// TestMain starts a real apiserver with Cluster API's and etcd-adapter's CRDs and the webhook
// configurations of config/webhook (as generated), and a manager serving this webhook alone, so
// every test creates Machines through the apiserver's admission chain.
func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	crdDir, err := capi.CoreCRDDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	apiServer, err = env.StartAPIServer(env.APIServerOptions{
		Scheme:            scheme(),
		CRDDirectoryPaths: []string{crdDir, filepath.Join("..", "..", "..", "config", "crd", "bases")},
		Webhooks:          &envtest.WebhookInstallOptions{Paths: []string{filepath.Join("..", "..", "..", "config", "webhook")}},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed to start the apiserver: %v\n", err)
		return 1
	}
	defer func() {
		if err := apiServer.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "failed to stop the apiserver: %v\n", err)
		}
	}()
	if err := startManager(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func scheme() *runtime.Scheme {
	s := env.Scheme()
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

func startManager(ctx context.Context) error {
	wio := apiServer.WebhookInstallOptions()
	opts := capi.ManagerOptions(apiServer.Client.Scheme())
	opts.WebhookServer = webhook.NewServer(webhook.Options{Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir})
	mgr, err := ctrl.NewManager(apiServer.Config, opts)
	if err != nil {
		return fmt.Errorf("failed to create the manager: %w", err)
	}
	if err := (&Webhook{Client: mgr.GetAPIReader(), WatchFilter: shard}).SetupWithManager(mgr); err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()
	started := mgr.GetWebhookServer().StartedChecker()
	deadline := time.Now().Add(time.Minute)
	for started(nil) != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("the webhook server did not start within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
