package pki

import (
	"crypto"
	"crypto/x509"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CA is an etcd certificate authority: a certificate and the key that signs leaf certificates.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// NewCA generates a CA with Cluster API's own generator, the one behind the `<cluster>-etcd`
// Secret that KubeadmControlPlane creates.
func NewCA() (*CA, error) {
	c := &secret.Certificate{Purpose: secret.EtcdCA}
	if err := c.Generate(); err != nil {
		return nil, fmt.Errorf("failed to generate etcd CA: %w", err)
	}
	return CAFromPEM(c.KeyPair.Cert, c.KeyPair.Key)
}

// CAFromPEM loads a CA from PEM-encoded certificate and key.
func CAFromPEM(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := certs.DecodeCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("failed to decode CA certificate: %w", err)
	}
	if cert == nil {
		return nil, fmt.Errorf("failed to decode CA certificate: no PEM block")
	}
	key, err := certs.DecodePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("failed to decode CA key: %w", err)
	}
	return &CA{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// CAFromSecret loads a CA from a Secret shaped like `<cluster>-etcd` (keys tls.crt, tls.key).
func CAFromSecret(s *corev1.Secret) (*CA, error) {
	return CAFromPEM(s.Data[secret.TLSCrtDataName], s.Data[secret.TLSKeyDataName])
}

// CertPEM returns the PEM-encoded CA certificate.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// KeyPEM returns the PEM-encoded CA private key.
func (ca *CA) KeyPEM() []byte { return ca.keyPEM }

// Certificate returns the parsed CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPool returns a pool that trusts only this CA.
func (ca *CA) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// Secret returns the `<cluster>-etcd` Secret holding this CA, as CAPI names and labels it.
// The Secret has no owner reference: in a test nothing garbage-collects it.
func (ca *CA) Secret(cluster client.ObjectKey) *corev1.Secret {
	c := &secret.Certificate{
		Purpose: secret.EtcdCA,
		KeyPair: &certs.KeyPair{Cert: ca.certPEM, Key: ca.keyPEM},
	}
	// Generated is false, so AsSecret ignores the owner argument.
	return c.AsSecret(cluster, metav1.OwnerReference{})
}
