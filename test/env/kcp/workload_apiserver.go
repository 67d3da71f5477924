package kcp

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// apiServerTimeout bounds the start and stop of the workload kube-apiserver on a busy machine.
const apiServerTimeout = 2 * time.Minute

// kubeadmAPIServerCommonName is the CommonName of kubeadm's apiserver serving certificate, the
// one KubeadmControlPlane looks for when it reads the certificate's expiry through the
// kube-apiserver Pod's port.
const kubeadmAPIServerCommonName = "kube-apiserver"

// workloadAPIServer is the workload cluster's kube-apiserver (with its own etcd for data, as
// envtest runs it), set up the way kubeadm sets it up: serving certificate
// CN=kube-apiserver signed by the cluster CA, client certificates trusted from the cluster CA.
type workloadAPIServer struct {
	// Config connects as system:masters with a client certificate signed by the cluster CA.
	Config *rest.Config
	// Client is an uncached client built from Config.
	Client client.Client

	env *envtest.Environment
	dir string
}

// newClusterCA generates a cluster CA with Cluster API's own generator.
func newClusterCA() (*keyPair, error) {
	c := &secret.Certificate{Purpose: secret.ClusterCA}
	if err := c.Generate(); err != nil {
		return nil, fmt.Errorf("failed to generate the cluster CA: %w", err)
	}
	return &keyPair{certPEM: c.KeyPair.Cert, keyPEM: c.KeyPair.Key}, nil
}

// startWorkloadAPIServer starts kube-apiserver with certificates from ca.
func startWorkloadAPIServer(ca *keyPair) (*workloadAPIServer, error) {
	assets, err := env.AssetsDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "etcd-adapter-kcp-apiserver-")
	if err != nil {
		return nil, fmt.Errorf("failed to create the workload kube-apiserver directory: %w", err)
	}
	s := &workloadAPIServer{dir: dir}
	if err := s.start(assets, ca); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

func (s *workloadAPIServer) start(assets string, ca *keyPair) error {
	if err := writeServingFiles(s.dir, ca); err != nil {
		return err
	}
	apiServer := &envtest.APIServer{CertDir: s.dir}
	// Note: with apiserver.crt present envtest keeps it (and does not fill SecureServing.CA),
	// so the serving CA is given here.
	apiServer.CA = ca.certPEM
	apiServer.Authn = &caAuthn{ca: ca}
	apiServer.Configure().Set("shutdown-send-retry-after", "true")
	s.env = &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		Scheme:                   env.Scheme(),
		ControlPlaneStartTimeout: apiServerTimeout,
		ControlPlaneStopTimeout:  apiServerTimeout,
		ControlPlane:             envtest.ControlPlane{APIServer: apiServer},
	}
	if err := env.EndWithTestProcess(s.env, assets); err != nil {
		return err
	}
	cfg, err := s.env.Start()
	if err != nil {
		return fmt.Errorf("failed to start the workload kube-apiserver: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme()})
	if err != nil {
		return fmt.Errorf("failed to create a client for the workload kube-apiserver: %w", err)
	}
	s.Config, s.Client = cfg, c
	return nil
}

// writeServingFiles writes what envtest would otherwise generate from its own CA: the serving
// certificate and key, and the service-account signing key, all from the cluster CA.
func writeServingFiles(dir string, ca *keyPair) error {
	serving, err := ca.issue(certs.Config{
		CommonName: kubeadmAPIServerCommonName,
		AltNames: certs.AltNames{
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
			IPs:      []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return err
	}
	sa, err := ca.issue(certs.Config{CommonName: "service-accounts", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"apiserver.crt": serving.certPEM, "apiserver.key": serving.keyPEM,
		"sa-signer.crt": sa.certPEM, "sa-signer.key": sa.keyPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("failed to write %s for the workload kube-apiserver: %w", name, err)
		}
	}
	return nil
}

// HostPort returns the apiserver's address as host:port.
func (s *workloadAPIServer) HostPort() (string, error) {
	u, err := url.Parse(s.Config.Host)
	if err != nil {
		return "", fmt.Errorf("failed to parse the workload apiserver URL %q: %w", s.Config.Host, err)
	}
	return u.Host, nil
}

// Stop stops kube-apiserver and its etcd and removes the directory. Safe to call twice.
func (s *workloadAPIServer) Stop() error {
	var errs []error
	if s.env != nil {
		errs = append(errs, s.env.Stop())
		s.env = nil
	}
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
		s.dir = ""
	}
	return errors.Join(errs...)
}
