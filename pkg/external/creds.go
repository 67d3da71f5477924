package external

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// credentials are the CA that verifies the members and the client certificate presented to them.
type credentials struct {
	roots *x509.CertPool
	cert  tls.Certificate
	// sum identifies the material: connections made with other material are not reused.
	sum [sha256.Size]byte
}

// CASecretName names the Secret with the etcd CA the backend reads, as Cluster API's
// util/secret names it for external etcd.
func CASecretName(cluster string) string { return secret.Name(cluster, secret.EtcdCA) }

// ClientSecretName names the Secret with the client certificate the backend reads, as Cluster
// API's util/secret names it for external etcd.
func ClientSecretName(cluster string) string { return secret.Name(cluster, secret.APIServerEtcdClient) }

// loadCredentials reads the CA and the client certificate. A missing or unusable Secret is
// etcd.ErrInvalidInput naming it; failing to read is etcd.ErrUnreachable (the management
// apiserver is down, and etcd cannot be asked without them).
func (b *Backend) loadCredentials(ctx context.Context) (*credentials, error) {
	ca, err := b.readSecret(ctx, CASecretName(b.cfg.Cluster.Name), secret.TLSCrtDataName)
	if err != nil {
		return nil, err
	}
	pair, err := b.readSecret(ctx, ClientSecretName(b.cfg.Cluster.Name), secret.TLSCrtDataName, secret.TLSKeyDataName)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca[0]) {
		return nil, fmt.Errorf("%w: Secret %s/%s: %s holds no PEM certificate", etcd.ErrInvalidInput, b.cfg.Cluster.Namespace, CASecretName(b.cfg.Cluster.Name), secret.TLSCrtDataName)
	}
	cert, err := tls.X509KeyPair(pair[0], pair[1])
	if err != nil {
		return nil, fmt.Errorf("%w: Secret %s/%s: not a usable client certificate: %w", etcd.ErrInvalidInput, b.cfg.Cluster.Namespace, ClientSecretName(b.cfg.Cluster.Name), err)
	}
	return &credentials{roots: roots, cert: cert, sum: sha256.Sum256(bytes.Join([][]byte{ca[0], pair[0], pair[1]}, []byte{0}))}, nil
}

// readSecret returns the named keys of a Secret of the cluster's namespace.
func (b *Backend) readSecret(ctx context.Context, name string, keys ...string) ([][]byte, error) {
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: b.cfg.Cluster.Namespace, Name: name}
	if err := b.cfg.Client.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: Secret %s is missing; external etcd needs it (Cluster API's util/secret naming)", etcd.ErrInvalidInput, key)
		}
		return nil, fmt.Errorf("%w: failed to read Secret %s: %w", etcd.ErrUnreachable, key, err)
	}
	out := make([][]byte, 0, len(keys))
	for _, k := range keys {
		if len(s.Data[k]) == 0 {
			return nil, fmt.Errorf("%w: Secret %s has no %s", etcd.ErrInvalidInput, key, k)
		}
		out = append(out, s.Data[k])
	}
	return out, nil
}

// tlsConfig verifies the server against the CA only (never InsecureSkipVerify); the name
// checked is the dialled host, which clientv3 sets per endpoint.
func (c *credentials) tlsConfig() *tls.Config {
	return &tls.Config{RootCAs: c.roots, Certificates: []tls.Certificate{c.cert}, MinVersion: tls.VersionTLS12}
}
