package env

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-adapter/etcd-adapter/test/env/parentdeath"
)

// controlPlaneTimeout bounds each start and stop of kube-apiserver and etcd. It is generous
// because the machine running the tests may be busy with other builds and tests.
const controlPlaneTimeout = 2 * time.Minute

// APIServerOptions configures StartAPIServer.
type APIServerOptions struct {
	// Scheme is used by the returned client and to install CRDs. Defaults to Scheme().
	Scheme *runtime.Scheme

	// CRDs are installed, and waited for, before StartAPIServer returns.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	// CRDDirectoryPaths are directories (or files) of CRD manifests to install; a missing path is
	// an error.
	CRDDirectoryPaths []string

	// Webhooks, when set, installs admission webhook configurations that point at a local
	// webhook server (envtest serves their certificates); WebhookInstallOptions returns where
	// that server must listen.
	Webhooks *envtest.WebhookInstallOptions

	// Flags are kube-apiserver flags set beside the environment's own (for example
	// egress-selector-config-file); a flag named here overrides the environment's value.
	Flags map[string]string
	// KubeAPIServer, when set, is the kube-apiserver binary to run instead of the assets
	// directory's, with a parent-death wrapper beside it (see WorkloadKubeAPIServerEnvVar).
	KubeAPIServer string
	// KubernetesVersion, when set, is the version the apiserver must report; StartAPIServer
	// fails otherwise.
	KubernetesVersion string
}

// APIServer is a real kube-apiserver backed by its own etcd, both started from the binaries that
// AssetsDir finds. Config authenticates as a system:masters user.
//
// The kube-apiserver process alone can be stopped and started again (StopServing, StartServing)
// to simulate an unreachable apiserver. It comes back on the same URL with the same serving
// certificate and the same client credentials, so kubeconfig Secrets that point at it stay valid.
// etcd keeps running meanwhile, so all data is kept across the restart.
type APIServer struct {
	// Config connects to the apiserver as an administrator.
	Config *rest.Config
	// Client is a direct (uncached) client built from Config with the options' scheme.
	Client client.Client

	env     *envtest.Environment
	certDir string

	mu      sync.Mutex
	serving bool
	stopped bool
}

// StartAPIServer starts etcd and kube-apiserver and installs the options' CRDs. Call Stop when
// done, also when a test fails.
func StartAPIServer(opts APIServerOptions) (*APIServer, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	if opts.Scheme == nil {
		opts.Scheme = Scheme()
	}
	// The serving certificates live in a directory owned here, not by envtest, so that a restart
	// of kube-apiserver reuses them instead of minting a new serving CA.
	certDir, err := os.MkdirTemp("", "etcd-adapter-apiserver-")
	if err != nil {
		return nil, fmt.Errorf("failed to create the kube-apiserver certificate directory: %w", err)
	}
	s := &APIServer{certDir: certDir, env: newEnvironment(assets, certDir, opts)}
	if err := EndWithTestProcess(s.env, assets); err != nil {
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	if opts.KubeAPIServer != "" {
		if err := s.useKubeAPIServer(opts.KubeAPIServer); err != nil {
			return nil, errors.Join(err, os.RemoveAll(certDir))
		}
	}
	if err := s.start(opts.Scheme); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	if opts.KubernetesVersion != "" {
		if err := s.checkVersion(opts.KubernetesVersion); err != nil {
			return nil, errors.Join(err, s.Stop())
		}
	}
	return s, nil
}

func newEnvironment(assets, certDir string, opts APIServerOptions) *envtest.Environment {
	apiServer := &envtest.APIServer{CertDir: certDir}
	// Without this, kube-apiserver waits up to its 60s ShutdownTimeout for open watches (a
	// connected ClusterCache holds some) before it exits; with it the HTTP server shuts down 2s
	// after in-flight requests drained.
	apiServer.Configure().Set("shutdown-send-retry-after", "true")
	for name, value := range opts.Flags {
		apiServer.Configure().Set(name, value)
	}
	e := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		Scheme:                   opts.Scheme,
		CRDs:                     opts.CRDs,
		CRDDirectoryPaths:        opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: controlPlaneTimeout,
		ControlPlaneStopTimeout:  controlPlaneTimeout,
		ControlPlane:             envtest.ControlPlane{APIServer: apiServer},
	}
	if opts.Webhooks != nil {
		e.WebhookInstallOptions = *opts.Webhooks
	}
	return e
}

// EndWithTestProcess makes e start kube-apiserver and etcd through the parent-death wrappers in
// the assets directory, so that both end when this process ends, also when it is killed (see
// test/env/parentdeath). The paths are set explicitly because envtest prefers
// $KUBEBUILDER_ASSETS to BinaryAssetsDirectory. Call it on every envtest.Environment before
// Start; StartAPIServer does.
func EndWithTestProcess(e *envtest.Environment, assets string) error {
	if e.ControlPlane.APIServer == nil {
		e.ControlPlane.APIServer = &envtest.APIServer{}
	}
	if e.ControlPlane.Etcd == nil {
		e.ControlPlane.Etcd = &envtest.Etcd{}
	}
	e.ControlPlane.APIServer.Path = filepath.Join(assets, wrapper("kube-apiserver"))
	e.ControlPlane.Etcd.Path = filepath.Join(assets, wrapper("etcd"))
	return parentdeath.Export()
}

// WebhookInstallOptions returns the webhook options the apiserver was started with, filled in
// with the local host, port and certificate directory a webhook server must serve on.
func (s *APIServer) WebhookInstallOptions() *envtest.WebhookInstallOptions {
	return &s.env.WebhookInstallOptions
}

func (s *APIServer) start(scheme *runtime.Scheme) error {
	cfg, err := s.env.Start()
	if err != nil {
		return fmt.Errorf("failed to start kube-apiserver and etcd: %w", err)
	}
	s.serving = true
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("failed to create a client for kube-apiserver %s: %w", cfg.Host, err)
	}
	s.Config, s.Client = cfg, c
	return nil
}

// AddAdmin returns a rest.Config for a new system:masters user with its own client certificate,
// signed by the apiserver's client CA. client-go shares one transport (and its connections)
// between configs with the same credentials, so kubeconfigs that must be connected to as if
// they were different clusters each need a user of their own.
func (s *APIServer) AddAdmin(name string) (*rest.Config, error) {
	u, err := s.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, s.Config)
	if err != nil {
		return nil, fmt.Errorf("failed to add user %s to kube-apiserver %s: %w", name, s.URL(), err)
	}
	return u.Config(), nil
}

// URL returns the apiserver's https URL; it does not change across StopServing/StartServing.
func (s *APIServer) URL() string { return s.Config.Host }

// StopServing stops the kube-apiserver process and leaves etcd running: the apiserver becomes
// unreachable (connection refused) until StartServing. Stopping twice is a no-op.
func (s *APIServer) StopServing() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.serving {
		return nil
	}
	if err := s.env.ControlPlane.APIServer.Stop(); err != nil {
		return fmt.Errorf("failed to stop kube-apiserver %s: %w", s.URL(), err)
	}
	s.serving = false
	return nil
}

// StartServing starts kube-apiserver again after StopServing, on the same address and port, with
// the same certificates and the data etcd kept. It returns once /healthz answers.
func (s *APIServer) StartServing() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return fmt.Errorf("failed to restart kube-apiserver %s: the environment was stopped", s.URL())
	}
	if s.serving {
		return nil
	}
	if err := s.env.ControlPlane.APIServer.Start(); err != nil {
		return fmt.Errorf("failed to restart kube-apiserver %s: %w", s.URL(), err)
	}
	s.serving = true
	return nil
}

// Stop stops kube-apiserver and etcd and removes their directories (and with them all data).
// It is safe to call more than once.
func (s *APIServer) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped, s.serving = true, false
	var errs []error
	if err := s.env.Stop(); err != nil {
		errs = append(errs, fmt.Errorf("failed to stop kube-apiserver and etcd: %w", err))
	}
	if err := os.RemoveAll(s.certDir); err != nil {
		errs = append(errs, fmt.Errorf("failed to remove %s: %w", s.certDir, err))
	}
	return errors.Join(errs...)
}
