package pki

import (
	"crypto/x509"
	"fmt"
	"net"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/certs"
)

// KCPClientCommonName is the CommonName KubeadmControlPlane puts in the etcd client
// certificate it mints for itself.
const KCPClientCommonName = "cluster-api.x-k8s.io"

// NewServerCert issues an etcd serving certificate for the member on nodeName, named as
// kubeadm names it (CN and DNS SAN = node name, plus localhost, 127.0.0.1, ::1 and ips).
// Note: kubeadm gives etcd server certificates both ServerAuth and ClientAuth, and so do we.
func (ca *CA) NewServerCert(nodeName string, ips ...net.IP) (KeyPair, error) {
	return ca.issue(certs.Config{
		CommonName: nodeName,
		AltNames:   nodeAltNames(nodeName, ips),
		Usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}

// NewPeerCert issues an etcd peer certificate for the member on nodeName, with the same names
// as the server certificate; peers use it both to serve and to dial.
func (ca *CA) NewPeerCert(nodeName string, ips ...net.IP) (KeyPair, error) {
	return ca.NewServerCert(nodeName, ips...)
}

// NewClientCert issues a client certificate with the given CommonName, for example
// KCPClientCommonName.
func (ca *CA) NewClientCert(commonName string) (KeyPair, error) {
	return ca.issue(certs.Config{
		CommonName: commonName,
		Usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// issue signs a fresh ECDSA key with the CA.
func (ca *CA) issue(cfg certs.Config) (KeyPair, error) {
	key, err := certs.NewSigner(bootstrapv1.EncryptionAlgorithmECDSAP256)
	if err != nil {
		return KeyPair{}, fmt.Errorf("failed to generate key for %s: %w", cfg.CommonName, err)
	}
	cert, err := cfg.NewSignedCert(key, ca.cert, ca.key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("failed to sign certificate for %s: %w", cfg.CommonName, err)
	}
	keyPEM, err := certs.EncodePrivateKeyPEMFromSigner(key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("failed to encode key for %s: %w", cfg.CommonName, err)
	}
	return KeyPair{Cert: certs.EncodeCertPEM(cert), Key: keyPEM}, nil
}

// nodeAltNames mirrors kubeadm's etcd certificate SANs: the node name, localhost and the
// loopback addresses, plus the addresses etcd listens on.
func nodeAltNames(nodeName string, ips []net.IP) certs.AltNames {
	all := append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...)
	return certs.AltNames{DNSNames: []string{nodeName, "localhost"}, IPs: all}
}
