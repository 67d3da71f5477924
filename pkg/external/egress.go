package external

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"syscall"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// The backend reaches into a network the workload cluster's admins do not own: the
// management cluster's. Whoever holds a workload cluster's etcd CA key can make a member report
// any client URL, so the backend dials only what the Cluster's objects configure (Endpoints, and
// client URLs on MachineHosts) and, with AllowedNetworks, only addresses in those networks.

// dialable reports whether a client URL a member reports may be dialled: it is a configured
// endpoint, or an https://host:port URL whose host is one of the configured Machine hosts.
func (b *Backend) dialable(clientURL string) bool {
	ep := normalise(clientURL)
	if slices.Contains(b.configured, ep) {
		return true
	}
	if checkEndpoint(ep) != nil {
		return false
	}
	u, err := url.Parse(ep)
	return err == nil && slices.Contains(b.cfg.MachineHosts, u.Hostname())
}

// allowed reports whether ip lies in the allowed networks; no networks allow every address.
func (b *Backend) allowed(ip netip.Addr) bool {
	if len(b.cfg.AllowedNetworks) == 0 {
		return true
	}
	ip = ip.Unmap()
	return slices.ContainsFunc(b.cfg.AllowedNetworks, func(p netip.Prefix) bool { return p.Contains(ip) })
}

// dial opens a TCP connection to addr (host:port) for the TLS probe and for clientv3. With
// AllowedNetworks, the host is resolved first and refused (etcd.ErrEndpointNotAllowed) when any
// of its addresses lies outside them, and the address actually connected to is checked again in
// the dialer's Control, so a name that resolves differently the second time (DNS rebinding)
// cannot slip past. A Config.DialContext (a proxy) is trusted with the connection after the
// first check.
func (b *Backend) dial(ctx context.Context, addr string) (net.Conn, error) {
	if len(b.cfg.AllowedNetworks) > 0 {
		if err := b.checkResolved(ctx, addr); err != nil {
			return nil, err
		}
	}
	if b.cfg.DialContext != nil {
		return b.cfg.DialContext(ctx, addr)
	}
	d := net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: cannot check address %q: %w", etcd.ErrEndpointNotAllowed, address, err)
		}
		if !b.allowed(ap.Addr()) {
			return fmt.Errorf("%w: %s resolved to %s", etcd.ErrEndpointNotAllowed, addr, ap.Addr())
		}
		return nil
	}}
	return d.DialContext(ctx, "tcp", addr)
}

// checkResolved resolves addr's host and refuses it when any address lies outside the allowed
// networks.
func (b *Backend) checkResolved(ctx context.Context, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %q is not host:port: %w", etcd.ErrInvalidInput, addr, err)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("failed to resolve %s: %w", host, err)
	}
	for _, ip := range ips {
		if !b.allowed(ip) {
			return fmt.Errorf("%w: %s resolves to %s", etcd.ErrEndpointNotAllowed, host, ip)
		}
	}
	return nil
}
