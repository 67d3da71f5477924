package kubeadm

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// ClientCommonName is the CommonName of the client certificate, the one KCP uses, so etcd
// audit logs and RBAC-by-CN setups see the same client.
const ClientCommonName = "cluster-api.x-k8s.io"

// clockSkew backdates the client certificate so a member whose clock is slightly behind
// accepts it.
const clockSkew = 5 * time.Minute

// credentials are the TLS material for one cluster's etcd: the minted client certificate and
// the CA that server certificates must chain to.
type credentials struct {
	uid         types.UID
	fingerprint string
	client      tls.Certificate
	roots       *x509.CertPool
	renewAt     time.Time
}

// certSource mints client certificates from the CA Secret and caches them per cluster UID and
// CA fingerprint: a rotated CA, or a Cluster re-created under the same name, gets a new one.
type certSource struct {
	cfg Config

	mu      sync.Mutex
	current *credentials
	// parsed is the CA parsed from the Secret data whose hash is dataHash, so an unchanged
	// Secret is not parsed again on every call.
	parsed   *parsedCA
	dataHash [sha256.Size]byte
}

// parsedCA is a CA read from the Secret.
type parsedCA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// secretKey is the `<cluster>-etcd` Secret holding the etcd CA.
func (s *certSource) secretKey() client.ObjectKey {
	return client.ObjectKey{Namespace: s.cfg.Cluster.Namespace, Name: secret.Name(s.cfg.Cluster.Name, secret.EtcdCA)}
}

// get returns credentials for the CA in the Secret now, and whether they differ from the ones
// returned last (then connections made with the old ones must go).
func (s *certSource) get(ctx context.Context, now time.Time) (*credentials, bool, error) {
	ca, err := s.readCA(ctx, now)
	if err != nil {
		return nil, false, err
	}
	caCert, caKey := ca.cert, ca.key
	fp := fingerprint(caCert)
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.current
	if cur != nil && cur.uid == s.cfg.ClusterUID && cur.fingerprint == fp && now.Before(cur.renewAt) {
		return cur, false, nil
	}
	minted, err := s.mint(caCert, caKey, now)
	if err != nil {
		return nil, false, err
	}
	minted.fingerprint = fp
	s.current = minted
	return minted, cur == nil || cur.fingerprint != fp || cur.uid != minted.uid, nil
}

// readCA reads the CA Secret and parses it unless its data is unchanged since last time; the
// validity of the CA is checked every time.
func (s *certSource) readCA(ctx context.Context, now time.Time) (*parsedCA, error) {
	key := s.secretKey()
	sec := &corev1.Secret{}
	if err := s.cfg.Client.Get(ctx, key, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: etcd CA Secret %s not found", etcd.ErrInvalidInput, key)
		}
		return nil, fmt.Errorf("failed to get etcd CA Secret %s: %w", key, err)
	}
	certPEM, keyPEM := sec.Data[secret.TLSCrtDataName], sec.Data[secret.TLSKeyDataName]
	h := sha256.Sum256(append(append(slices.Clone(certPEM), 0), keyPEM...))
	s.mu.Lock()
	ca := s.parsed
	if h != s.dataHash {
		ca = nil
	}
	s.mu.Unlock()
	if ca == nil {
		cert, caKey, err := parseCA(key, certPEM, keyPEM)
		if err != nil {
			return nil, err
		}
		ca = &parsedCA{cert: cert, key: caKey}
		s.mu.Lock()
		s.parsed, s.dataHash = ca, h
		s.mu.Unlock()
	}
	if err := checkCA(ca.cert, now); err != nil {
		return nil, fmt.Errorf("%w: etcd CA Secret %s: %w", etcd.ErrInvalidInput, key, err)
	}
	return ca, nil
}

// parseCA parses and checks the Secret's data. Every problem is an etcd.ErrInvalidInput that
// names the Secret and what is wrong with it.
func parseCA(key client.ObjectKey, certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	switch {
	case len(certPEM) == 0:
		return nil, nil, fmt.Errorf("%w: etcd CA Secret %s has no %s", etcd.ErrInvalidInput, key, secret.TLSCrtDataName)
	case len(keyPEM) == 0:
		return nil, nil, fmt.Errorf("%w: etcd CA Secret %s has no %s (the CA key is needed to mint a client certificate)", etcd.ErrInvalidInput, key, secret.TLSKeyDataName)
	}
	caCert, err := certs.DecodeCertPEM(certPEM)
	if err == nil && caCert == nil {
		err = errors.New("no PEM block")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: etcd CA Secret %s: %s is not a PEM certificate: %w", etcd.ErrInvalidInput, key, secret.TLSCrtDataName, err)
	}
	if !caCert.IsCA {
		return nil, nil, fmt.Errorf("%w: etcd CA Secret %s: %s is not a CA certificate", etcd.ErrInvalidInput, key, secret.TLSCrtDataName)
	}
	caKey, err := certs.DecodePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: etcd CA Secret %s: %s is not a PEM private key: %w", etcd.ErrInvalidInput, key, secret.TLSKeyDataName, err)
	}
	if !publicKeysEqual(caCert.PublicKey, caKey.Public()) {
		return nil, nil, fmt.Errorf("%w: etcd CA Secret %s: %s does not belong to the certificate in %s", etcd.ErrInvalidInput, key, secret.TLSKeyDataName, secret.TLSCrtDataName)
	}
	return caCert, caKey, nil
}

// checkCA refuses a CA certificate that cannot sign client certificates now.
func checkCA(c *x509.Certificate, now time.Time) error {
	switch {
	case now.After(c.NotAfter):
		return fmt.Errorf("the CA certificate expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(c.NotBefore):
		return fmt.Errorf("the CA certificate is not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// fingerprint identifies a CA certificate.
func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// mint issues a client certificate valid for CertTTL (never beyond the CA), renewed once two
// thirds of its life passed.
func (s *certSource) mint(caCert *x509.Certificate, caKey crypto.Signer, now time.Time) (*credentials, error) {
	key, err := newKey(s.cfg.KeyAlgorithm)
	if err != nil {
		return nil, fmt.Errorf("failed to generate the etcd client key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("failed to generate a certificate serial number: %w", err)
	}
	notAfter := now.Add(s.cfg.CertTTL)
	if notAfter.After(caCert.NotAfter) {
		notAfter = caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: ClientCommonName},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     keyUsage(key),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("failed to sign the etcd client certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("failed to parse the etcd client certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	return &credentials{
		uid:     s.cfg.ClusterUID,
		client:  tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		roots:   roots,
		renewAt: now.Add(notAfter.Sub(now) * 2 / 3),
	}, nil
}

// keyUsage is what the key does in a TLS client handshake: it signs, and an RSA key may also
// encipher (RSA key exchange).
func keyUsage(key crypto.Signer) x509.KeyUsage {
	if _, ok := key.(*rsa.PrivateKey); ok {
		return x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	}
	return x509.KeyUsageDigitalSignature
}

func newKey(alg KeyAlgorithm) (crypto.Signer, error) {
	if alg == KeyECDSAP256 {
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	return rsa.GenerateKey(rand.Reader, 2048)
}

// tlsConfig verifies the member on nodeName: the serving certificate must chain to the etcd
// CA and name the Node (kubeadm puts the node name in the etcd server certificate's SANs).
// Standard verification does both; nothing is skipped.
func (c *credentials) tlsConfig(nodeName string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		ServerName:   nodeName,
		RootCAs:      c.roots,
		Certificates: []tls.Certificate{c.client},
		// etcd serves gRPC over HTTP/2, which Go's TLS server only speaks when ALPN says h2.
		NextProtos: []string{"h2"},
	}
}
