package kubeadm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"k8s.io/client-go/rest"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm/internal/portforward"
)

// dialer opens TLS connections to one member through the workload apiserver.
type dialer struct {
	cfg     Config
	tunnels portforward.Dialer
}

// dial opens a port-forward to etcd-<node>:2379 and completes a verified TLS handshake over
// it, bounded by DialTimeout. Errors wrap etcd.ErrUnreachable, or etcd.ErrInvalidInput when
// the member's certificate is not trusted (retrying will not help).
func (d *dialer) dial(ctx context.Context, node string, creds *credentials) (net.Conn, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, d.cfg.DialTimeout, fmt.Errorf("dial timeout %s expired", d.cfg.DialTimeout))
	defer cancel()
	t, err := d.openTunnel(ctx, node)
	if err != nil {
		return nil, err
	}
	conn := tls.Client(t, creds.tlsConfig(node))
	if err := conn.HandshakeContext(ctx); err != nil {
		// Explain before closing: closing the tunnel ends the wait for the kubelet's reason.
		err = handshakeError(ctx, t, node, err)
		_ = t.Close()
		return nil, err
	}
	return conn, nil
}

// handshakeError explains a failed handshake: an untrusted or misnamed certificate, or the
// kubelet's reason why nothing answered on the Pod's port.
func handshakeError(ctx context.Context, t portforward.Conn, node string, err error) error {
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		return fmt.Errorf("%w: etcd on Node %s presented a certificate that does not chain to the etcd CA or does not name the Node: %w", etcd.ErrInvalidInput, node, err)
	}
	if msg := t.RemoteError(); msg != "" {
		return fmt.Errorf("%w: etcd on Node %s: %s", etcd.ErrUnreachable, node, msg)
	}
	if cause := context.Cause(ctx); cause != nil {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	return fmt.Errorf("%w: TLS handshake with etcd on Node %s failed: %w", etcd.ErrUnreachable, node, err)
}

// openTunnel opens a port-forward to etcd-<node>:2379 through the workload apiserver, bounded
// by ctx.
func (d *dialer) openTunnel(ctx context.Context, node string) (portforward.Conn, error) {
	restCfg, err := d.cfg.RESTConfig(ctx)
	if err != nil {
		return nil, classifyAPIError(err, "failed to get the workload cluster's REST config")
	}
	restCfg = rest.CopyConfig(restCfg)
	restCfg.Timeout = d.cfg.DialTimeout
	return d.tunnels.Open(ctx, restCfg, node)
}
