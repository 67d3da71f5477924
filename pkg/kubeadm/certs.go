package kubeadm

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
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
	// sessions resumes TLS sessions with members: a new connection to a member seen before
	// skips the certificate exchange (a cold observation after an idle eviction costs less).
	sessions tls.ClientSessionCache
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

// parsedCA is a CA read from the Secret: the certificate that signs client certificates (the
// one tls.key belongs to) and every CA certificate of the bundle, all trusted for servers.
type parsedCA struct {
	cert   *x509.Certificate
	key    crypto.Signer
	bundle []*x509.Certificate
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
	fp := fingerprint(ca.bundle)
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.current
	if cur != nil && cur.uid == s.cfg.ClusterUID && cur.fingerprint == fp && now.Before(cur.renewAt) {
		return cur, false, nil
	}
	minted, err := s.mint(ca, now)
	if err != nil {
		return nil, false, fmt.Errorf("%w: etcd CA Secret %s: %w", etcd.ErrInvalidInput, s.secretKey(), err)
	}
	minted.fingerprint = fp
	s.current = minted
	return minted, cur == nil || cur.fingerprint != fp || cur.uid != minted.uid, nil
}

// readCA reads the CA Secret and parses it unless its data is unchanged since last time; the
// validity of the CA is checked every time.
func (s *certSource) readCA(ctx context.Context, now time.Time) (*parsedCA, error) {
	key := s.secretKey()
	sec, err := s.readSecret(ctx, key)
	if err != nil {
		return nil, err
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
		var err error
		if ca, err = parseCA(key, certPEM, keyPEM); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.parsed, s.dataHash = ca, h
		s.mu.Unlock()
	}
	if err := checkCA(ca.cert, now); err != nil {
		return nil, fmt.Errorf("%w: etcd CA Secret %s: %w", etcd.ErrInvalidInput, key, err)
	}
	return ca, nil
}

// readSecret reads the CA Secret through the configured (cached) reader. When that says not
// found, it reads once more through APIReader when there is one: a Secret caching client only
// sees Secrets its informer selects (and not yet those created a moment ago), as CAPI's own
// Secret caching client falls back to its API reader for.
func (s *certSource) readSecret(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	err := s.cfg.Client.Get(ctx, key, sec)
	if apierrors.IsNotFound(err) && s.cfg.APIReader != nil {
		err = s.cfg.APIReader.Get(ctx, key, sec)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: etcd CA Secret %s not found", etcd.ErrInvalidInput, key)
	case err != nil:
		return nil, fmt.Errorf("failed to get etcd CA Secret %s: %w", key, err)
	}
	return sec, nil
}

// parseCA parses and checks the Secret's data. tls.crt may hold several CA certificates (a CA
// rotation adds the new one next to the old): every one is trusted for servers, and the one
// tls.key belongs to signs client certificates. Every problem is an etcd.ErrInvalidInput that
// names the Secret and what is wrong with it.
func parseCA(key client.ObjectKey, certPEM, keyPEM []byte) (*parsedCA, error) {
	switch {
	case len(certPEM) == 0:
		return nil, fmt.Errorf("%w: etcd CA Secret %s has no %s", etcd.ErrInvalidInput, key, secret.TLSCrtDataName)
	case len(keyPEM) == 0:
		return nil, fmt.Errorf("%w: etcd CA Secret %s has no %s (the CA key is needed to mint a client certificate)", etcd.ErrInvalidInput, key, secret.TLSKeyDataName)
	}
	bundle, err := decodeCerts(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: etcd CA Secret %s: %s is not a PEM certificate: %w", etcd.ErrInvalidInput, key, secret.TLSCrtDataName, err)
	}
	for _, c := range bundle {
		if !c.IsCA {
			return nil, fmt.Errorf("%w: etcd CA Secret %s: %s holds a certificate that is not a CA certificate (%s)", etcd.ErrInvalidInput, key, secret.TLSCrtDataName, c.Subject)
		}
	}
	caKey, err := certs.DecodePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: etcd CA Secret %s: %s is not a PEM private key: %w", etcd.ErrInvalidInput, key, secret.TLSKeyDataName, err)
	}
	for _, c := range bundle {
		if publicKeysEqual(c.PublicKey, caKey.Public()) {
			return &parsedCA{cert: c, key: caKey, bundle: bundle}, nil
		}
	}
	return nil, fmt.Errorf("%w: etcd CA Secret %s: %s does not belong to any certificate in %s", etcd.ErrInvalidInput, key, secret.TLSKeyDataName, secret.TLSCrtDataName)
}

// decodeCerts decodes every PEM certificate block.
func decodeCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate block")
	}
	return out, nil
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

// fingerprint identifies a CA bundle.
func fingerprint(bundle []*x509.Certificate) string {
	h := sha256.New()
	for _, c := range bundle {
		h.Write(c.Raw)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// mint issues a client certificate valid for CertTTL (never beyond the CA), renewed once two
// thirds of its life passed. The key is generated by CAPI's util/certs signer for the
// configured algorithm (the cluster's, as KCP's spec.kubeadmConfigSpec.clusterConfiguration.
// encryptionAlgorithm names it). The certificate is signed here rather than with
// certs.Config.NewSignedCert, which fixes a validity of years.
func (s *certSource) mint(ca *parsedCA, now time.Time) (*credentials, error) {
	key, err := certs.NewSigner(bootstrapv1.EncryptionAlgorithmType(s.cfg.KeyAlgorithm))
	if err != nil {
		return nil, fmt.Errorf("failed to generate the etcd client key (%s): %w", s.cfg.KeyAlgorithm, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("failed to generate a certificate serial number: %w", err)
	}
	notAfter := now.Add(s.cfg.CertTTL)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: ClientCommonName},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     keyUsage(key),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("failed to sign the etcd client certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("failed to parse the etcd client certificate: %w", err)
	}
	roots := x509.NewCertPool()
	for _, c := range ca.bundle {
		roots.AddCert(c)
	}
	return &credentials{
		uid:      s.cfg.ClusterUID,
		client:   tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		roots:    roots,
		renewAt:  now.Add(notAfter.Sub(now) * 2 / 3),
		sessions: tls.NewLRUClientSessionCache(64),
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
		NextProtos:         []string{"h2"},
		ClientSessionCache: c.sessions,
	}
}
