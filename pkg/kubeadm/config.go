package kubeadm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Defaults of Config, KCP's where KCP has one.
const (
	// DefaultDialTimeout bounds opening one port-forward and TLS handshake (KCP: 10 s).
	DefaultDialTimeout = 10 * time.Second
	// DefaultCallTimeout bounds every etcd call (KCP: 15 s).
	DefaultCallTimeout = 15 * time.Second
	// DefaultCertTTL is the validity of the minted client certificate. KCP mints 10 years; a day
	// limits what a leaked certificate is worth.
	DefaultCertTTL = 24 * time.Hour
	// DefaultMaxConcurrency bounds how many members are asked (and dialled) at once.
	DefaultMaxConcurrency = 8
	// DefaultIdleTimeout is how long an unused member connection is kept.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultKeptCallTimeout bounds a call over a connection kept from an earlier call. A
	// port-forward that died without closing (nothing tells gRPC) would otherwise hold the
	// observation for the whole CallTimeout; past it, the member is asked again over a new
	// connection with the full CallTimeout.
	DefaultKeptCallTimeout = 3 * time.Second
)

// KeyAlgorithm is the algorithm of the client certificate's key, by the names kubeadm and
// CAPI's KubeadmConfigSpec (clusterConfiguration.encryptionAlgorithm) give them: pass the
// cluster's, so the etcd client key follows the cluster's policy.
type KeyAlgorithm string

// Key algorithms; the values of CAPI's bootstrapv1.EncryptionAlgorithmType.
const (
	// KeyRSA2048 is RSA with a 2048-bit key, kubeadm's default.
	KeyRSA2048 KeyAlgorithm = KeyAlgorithm(bootstrapv1.EncryptionAlgorithmRSA2048)
	// KeyRSA3072 is RSA with a 3072-bit key.
	KeyRSA3072 KeyAlgorithm = KeyAlgorithm(bootstrapv1.EncryptionAlgorithmRSA3072)
	// KeyRSA4096 is RSA with a 4096-bit key.
	KeyRSA4096 KeyAlgorithm = KeyAlgorithm(bootstrapv1.EncryptionAlgorithmRSA4096)
	// KeyECDSAP256 is ECDSA on P-256: faster to generate and to handshake.
	KeyECDSAP256 KeyAlgorithm = KeyAlgorithm(bootstrapv1.EncryptionAlgorithmECDSAP256)
	// KeyECDSAP384 is ECDSA on P-384.
	KeyECDSAP384 KeyAlgorithm = KeyAlgorithm(bootstrapv1.EncryptionAlgorithmECDSAP384)
)

// RESTConfigFunc returns the REST config of the workload cluster's apiserver. It is called on
// every dial and pod discovery, so it must be cheap (the ClusterCache's is).
type RESTConfigFunc func(ctx context.Context) (*rest.Config, error)

// FromClusterCache returns the workload cluster's REST config from CAPI's ClusterCache. A
// cluster that is not connected is reported as etcd.ErrUnreachable.
func FromClusterCache(cc clustercache.ClusterCache, cluster client.ObjectKey) RESTConfigFunc {
	return func(ctx context.Context) (*rest.Config, error) {
		cfg, err := cc.GetRESTConfig(ctx, cluster)
		if err != nil {
			if errors.Is(err, clustercache.ErrClusterNotConnected) {
				return nil, fmt.Errorf("%w: workload cluster %s: %w", etcd.ErrUnreachable, cluster, err)
			}
			return nil, fmt.Errorf("failed to get REST config of workload cluster %s: %w", cluster, err)
		}
		return cfg, nil
	}
}

// StaticRESTConfig returns cfg on every call, for providers that hold the config themselves.
func StaticRESTConfig(cfg *rest.Config) RESTConfigFunc {
	return func(context.Context) (*rest.Config, error) { return cfg, nil }
}

// Config configures a Backend for one workload cluster.
type Config struct {
	// Cluster is the namespace and name of the CAPI Cluster; the etcd CA is read from the
	// Secret `<name>-etcd` in its namespace. Required.
	Cluster client.ObjectKey
	// ClusterUID is the Cluster's UID; the client certificate is cached per UID and CA, so a
	// Cluster re-created under the same name never reuses a certificate.
	ClusterUID types.UID
	// RESTConfig reaches the workload apiserver (FromClusterCache or StaticRESTConfig). Required.
	RESTConfig RESTConfigFunc
	// Client reads the CA Secret from the management cluster. Required. The Secret is read on
	// every call (so a rotated CA is picked up at once), so give it a cached reader: the
	// manager's client, or CAPI's Secret-caching client as KCP does.
	Client client.Reader
	// APIReader reads the CA Secret uncached when Client says it is not found (a Secret caching
	// client does not see every Secret, nor one created a moment ago); optional, for example the
	// manager's GetAPIReader().
	APIReader client.Reader

	// DialTimeout bounds one port-forward plus TLS handshake; zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// CallTimeout bounds every etcd call; zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// CertTTL is the client certificate's validity; zero means DefaultCertTTL. It is renewed
	// once two thirds of it passed.
	CertTTL time.Duration
	// KeyAlgorithm of the client certificate; empty means KeyRSA2048.
	KeyAlgorithm KeyAlgorithm
	// MaxConcurrency bounds how many members are asked at once; zero means
	// DefaultMaxConcurrency.
	MaxConcurrency int
	// IdleTimeout is how long an unused member connection is kept; zero means
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// KeptCallTimeout bounds a call over a connection kept from an earlier call (never more than
	// CallTimeout); zero means DefaultKeptCallTimeout. A call that fails on a kept connection is
	// retried once on a new one with the full CallTimeout.
	KeptCallTimeout time.Duration
	// OnConnectionLost, when set, is called when a member connection the backend keeps between
	// calls ends without the backend closing it: the member's etcd stopped (it sends a GOAWAY),
	// its Pod, kubelet or Node went away (the port-forward stream closes), or keep-alive found the
	// tunnel dead. The backend does not observe by itself; the owner observes again to learn
	// which member failed, instead of waiting for its next periodic observation. It is called
	// on gRPC's goroutines and must not block. Calls are coalesced: at most one per 5 s per
	// backend, with one trailing call at the end of those 5 s when a connection was lost within
	// them. Not called for connections the backend closes itself (Close, IdleTimeout, a member
	// that left, a new CA). Nil: nobody is told. Either way the lost connection is closed, and the
	// next observation dials the member again.
	OnConnectionLost func()
	// Logger receives the backend's logs; zero discards them. Calls also log to the logger in
	// their context when it has one.
	Logger logr.Logger
}

// withDefaults validates c and fills its zero settings.
func (c Config) withDefaults() (Config, error) {
	if c.Cluster.Name == "" || c.RESTConfig == nil || c.Client == nil {
		return c, fmt.Errorf("%w: kubeadm backend needs Cluster, RESTConfig and Client", etcd.ErrInvalidInput)
	}
	c.DialTimeout = orDefault(c.DialTimeout, DefaultDialTimeout)
	c.CallTimeout = orDefault(c.CallTimeout, DefaultCallTimeout)
	c.CertTTL = orDefault(c.CertTTL, DefaultCertTTL)
	c.IdleTimeout = orDefault(c.IdleTimeout, DefaultIdleTimeout)
	c.KeptCallTimeout = orDefault(c.KeptCallTimeout, DefaultKeptCallTimeout)
	if c.MaxConcurrency <= 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	switch c.KeyAlgorithm {
	case "":
		c.KeyAlgorithm = KeyRSA2048
	case KeyRSA2048, KeyRSA3072, KeyRSA4096, KeyECDSAP256, KeyECDSAP384:
	default:
		return c, fmt.Errorf("%w: unknown client key algorithm %q", etcd.ErrInvalidInput, c.KeyAlgorithm)
	}
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
