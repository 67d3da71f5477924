package kcp

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// clientCAFile is where caAuthn writes the CA kube-apiserver trusts for client certificates.
const clientCAFile = "client-ca.crt"

// caAuthn makes kube-apiserver trust the cluster CA (`<cluster>-ca`) for client certificates,
// as kubeadm configures it. KubeadmControlPlane writes the `<cluster>-kubeconfig` Secret with
// a client certificate signed by that CA (CN kubernetes-admin, O system:masters), and envtest's
// own users are signed by it too.
type caAuthn struct {
	ca  *keyPair
	dir string
}

var _ envtest.Authn = &caAuthn{}

// Configure points --client-ca-file at the cluster CA.
func (a *caAuthn) Configure(workDir string, args *envtest.Arguments) error {
	a.dir = workDir
	args.Set("client-ca-file", filepath.Join(workDir, clientCAFile))
	return nil
}

// Start writes the cluster CA certificate where Configure pointed.
func (a *caAuthn) Start() error {
	if a.dir == "" {
		return fmt.Errorf("failed to start the cluster CA authenticator: not configured")
	}
	if err := os.WriteFile(filepath.Join(a.dir, clientCAFile), a.ca.certPEM, 0o600); err != nil {
		return fmt.Errorf("failed to write the cluster CA for kube-apiserver: %w", err)
	}
	return nil
}

// AddUser signs a client certificate for user (CN name, O groups) with the cluster CA.
func (a *caAuthn) AddUser(user envtest.User, base *rest.Config) (*rest.Config, error) {
	kp, err := a.ca.issue(certs.Config{
		CommonName:   user.Name,
		Organization: user.Groups,
		Usages:       []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to issue a client certificate for %s: %w", user.Name, err)
	}
	cfg := rest.CopyConfig(base)
	cfg.CertData, cfg.KeyData = kp.certPEM, kp.keyPEM
	return cfg, nil
}

// Stop does nothing: the files live in kube-apiserver's directory, removed with it.
func (a *caAuthn) Stop() error { return nil }

// keyPair is a PEM certificate and key; for a CA, issue signs leaf certificates with it.
type keyPair struct {
	certPEM, keyPEM []byte
}

// issue signs a fresh ECDSA key with the CA kp.
func (kp *keyPair) issue(cfg certs.Config) (*keyPair, error) {
	caCert, err := certs.DecodeCertPEM(kp.certPEM)
	if err != nil || caCert == nil {
		return nil, fmt.Errorf("failed to decode the CA certificate: %w", err)
	}
	caKey, err := certs.DecodePrivateKeyPEM(kp.keyPEM)
	if err != nil {
		return nil, fmt.Errorf("failed to decode the CA key: %w", err)
	}
	key, err := certs.NewSigner(bootstrapv1.EncryptionAlgorithmECDSAP256)
	if err != nil {
		return nil, fmt.Errorf("failed to generate a key for %s: %w", cfg.CommonName, err)
	}
	cert, err := cfg.NewSignedCert(key, caCert, caKey)
	if err != nil {
		return nil, fmt.Errorf("failed to sign a certificate for %s: %w", cfg.CommonName, err)
	}
	keyPEM, err := certs.EncodePrivateKeyPEMFromSigner(key)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the key of %s: %w", cfg.CommonName, err)
	}
	return &keyPair{certPEM: certs.EncodeCertPEM(cert), keyPEM: keyPEM}, nil
}
