package pki

import (
	"crypto/tls"
	"fmt"
)

// ClientTLSConfig returns a TLS configuration that presents kp and verifies the server
// against the CA. serverName is the name to verify (for etcd: the node name); empty means
// the dialled host.
// Note: gRPC (and so clientv3) overwrites ServerName with the connection's authority; see
// etcdcluster.WithServerName.
func (ca *CA) ClientTLSConfig(kp KeyPair, serverName string) (*tls.Config, error) {
	cert, err := kp.TLSCertificate()
	if err != nil {
		return nil, fmt.Errorf("failed to build client TLS config: %w", err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      ca.CertPool(),
		ServerName:   serverName,
		MinVersion:   tls.VersionTLS12,
	}, nil
}
