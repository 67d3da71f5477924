package kubelet

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
)

// servingCA signs every stand-in's serving certificate. Nothing verifies it (see the package
// documentation); one CA per process saves generating an RSA key per kubelet.
var servingCA = sync.OnceValues(pki.NewCA)

// listen opens the kubelet's TLS port on the Node's IP and starts serving it.
func (k *Kubelet) listen() error {
	cfg, err := k.servingTLSConfig()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(k.opts.NodeIP, "0"))
	if err != nil {
		return fmt.Errorf("failed to listen for kubelet %s: %w", k.opts.NodeName, err)
	}
	k.forwards = map[net.Conn]struct{}{}
	k.conns = map[net.Conn]struct{}{}
	k.listener = &trackingListener{Listener: l, kubelet: k}
	k.server = &http.Server{Handler: k.handler(), ReadHeaderTimeout: streamCreationTimeout}
	k.wg.Go(func() {
		if err := k.server.Serve(tls.NewListener(k.listener, cfg)); !errors.Is(err, http.ErrServerClosed) {
			k.opts.Logger.Error(err, "Kubelet stand-in server failed", "node", k.opts.NodeName)
		}
	})
	return nil
}

// servingTLSConfig returns a TLS configuration with a certificate for the Node.
func (k *Kubelet) servingTLSConfig() (*tls.Config, error) {
	ca, err := servingCA()
	if err != nil {
		return nil, fmt.Errorf("failed to create kubelet serving CA: %w", err)
	}
	kp, err := ca.NewServerCert(k.opts.NodeName, net.ParseIP(k.opts.NodeIP))
	if err != nil {
		return nil, fmt.Errorf("failed to issue kubelet serving certificate: %w", err)
	}
	cert, err := kp.TLSCertificate()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// trackingListener records accepted connections, because port-forward connections are
// hijacked from the HTTP server and only closing them ends an established tunnel.
type trackingListener struct {
	net.Listener
	kubelet *Kubelet
}

// Accept records the accepted connection.
func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	k := l.kubelet
	k.mu.Lock()
	defer k.mu.Unlock()
	k.conns[c] = struct{}{}
	return &trackedConn{Conn: c, kubelet: k}, nil
}

// trackedConn forgets itself when closed.
type trackedConn struct {
	net.Conn
	kubelet *Kubelet
}

// Close closes the connection and forgets it.
func (c *trackedConn) Close() error {
	c.kubelet.mu.Lock()
	delete(c.kubelet.conns, c.Conn)
	c.kubelet.mu.Unlock()
	return c.Conn.Close()
}

// closeConns closes every connection to the kubelet port.
func (k *Kubelet) closeConns() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for c := range k.conns {
		_ = c.Close()
	}
}
