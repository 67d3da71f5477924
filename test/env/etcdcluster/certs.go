package etcdcluster

import (
	"fmt"
	"net"

	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
)

// writeCerts issues the member's server and peer certificates for its Node and listen address
// and writes them where embedConfig expects them.
func (m *Member) writeCerts() error {
	ip := net.ParseIP(m.spec.IP)
	if ip == nil {
		return fmt.Errorf("invalid IP %q for etcd member %s", m.spec.IP, m.Name())
	}
	for kind, issue := range map[string]func(string, ...net.IP) (pki.KeyPair, error){
		"server": m.settings.ca.NewServerCert,
		"peer":   m.settings.ca.NewPeerCert,
	} {
		kp, err := issue(m.NodeName(), ip)
		if err != nil {
			return fmt.Errorf("failed to issue %s certificate for etcd member %s: %w", kind, m.Name(), err)
		}
		if _, _, err := kp.WriteFiles(m.certDir(), kind); err != nil {
			return fmt.Errorf("failed to write %s certificate for etcd member %s: %w", kind, m.Name(), err)
		}
	}
	return nil
}
