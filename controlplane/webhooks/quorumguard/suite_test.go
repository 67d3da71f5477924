package quorumguard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
)

// management is a real kube-apiserver with Cluster API's and etcd-adapter's CRDs that sends every
// Machine deletion to a guard served by a manager (its cache, client and Event recorder), as
// setup.Setup registers it; etcd behind the guard is scripted.
type management struct {
	apiServer *env.APIServer
	// cached is the manager's client, from which the guard reads Clusters and ControlPlaneEtcds.
	cached client.Client
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

// managementCluster starts the management cluster once per test process, with the guard's
// backend answering backend's observations.
func managementCluster(t *testing.T, backend staticBackend) *management {
	t.Helper()
	mgmtOnce.Do(func() { mgmt, mgmtErr = startManagement(backend) })
	if mgmtErr != nil {
		t.Fatalf("failed to start the management cluster: %v", mgmtErr)
	}
	return mgmt
}

// guardWebhook is the guard's registration as config/webhook has it (the kubebuilder marker in
// guard.go), alone: the other webhooks are not served here.
func guardWebhook() *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-quorum-guard"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "etcd-quorum.etcdadapter.cluster.x-k8s.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "system", Name: "webhook-service", Path: ptr.To(Path)}},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}, Rule: admissionregistrationv1.Rule{APIGroups: []string{clusterv1.GroupVersion.Group}, APIVersions: []string{clusterv1.GroupVersion.Version}, Resources: []string{"machines"}}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
}

func startManagement(backend staticBackend) (*management, error) {
	crdDir, err := capi.CoreCRDDir()
	if err != nil {
		return nil, err
	}
	scheme := env.Scheme()
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	apiServer, err := env.StartAPIServer(env.APIServerOptions{
		Scheme:            scheme,
		CRDDirectoryPaths: []string{crdDir, filepath.Join("..", "..", "..", "config", "crd", "bases")},
		Webhooks:          &envtest.WebhookInstallOptions{ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{guardWebhook()}},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	fail := func(err error) (*management, error) {
		cancel()
		return nil, errors.Join(err, apiServer.Stop())
	}
	wio := apiServer.WebhookInstallOptions()
	opts := capi.ManagerOptions(scheme)
	opts.WebhookServer = webhook.NewServer(webhook.Options{Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir})
	mgr, err := ctrl.NewManager(apiServer.Config, opts)
	if err == nil {
		err = creation.IndexByClusterName(ctx, mgr.GetFieldIndexer())
	}
	if err == nil {
		err = (&Guard{Client: mgr.GetClient(), Backends: backend}).SetupWithManager(mgr)
	}
	if err != nil {
		return fail(fmt.Errorf("failed to set up the manager: %w", err))
	}
	go func() { _ = mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fail(fmt.Errorf("the manager's cache did not sync"))
	}
	started := mgr.GetWebhookServer().StartedChecker()
	for deadline := time.Now().Add(time.Minute); started(nil) != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("the webhook server did not start within a minute"))
		}
	}
	return &management{apiServer: apiServer, cached: mgr.GetClient(), stop: cancel}, nil
}
