package etcdcluster

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"

	"go.etcd.io/etcd/server/v3/embed"
)

// Member is one etcd member, hosted by a Node. It stays in its Cluster after Stop, Kill or
// Wipe, so tests can restart it or assert on it.
type Member struct {
	settings *settings
	spec     MemberSpec
	dir      string
	client   url.URL
	peer     url.URL
	// advertise are the client URLs advertised besides client (MemberSpec.AdvertiseClientURLs).
	advertise []url.URL

	mu             sync.Mutex
	etcd           *embed.Etcd
	proc           *process
	id             uint64
	initialCluster string
	clusterState   string
	wiped          bool
}

// newMember allocates the member's ports, issues its certificates and writes them to disk.
func newMember(s *settings, spec MemberSpec) (*Member, error) {
	clientPort, err := ports.allocate(spec.IP)
	if err != nil {
		return nil, err
	}
	peerPort, err := ports.allocate(spec.IP)
	if err != nil {
		return nil, err
	}
	m := &Member{
		settings: s,
		spec:     spec,
		dir:      filepath.Join(s.dir, spec.MemberName),
		client:   httpsURL(spec.IP, clientPort),
		peer:     httpsURL(spec.IP, peerPort),
	}
	for _, a := range spec.AdvertiseClientURLs {
		u, err := url.Parse(a)
		if err != nil {
			return nil, fmt.Errorf("member %s: advertised client URL %q: %w", spec.MemberName, a, err)
		}
		m.advertise = append(m.advertise, *u)
	}
	if err := m.writeCerts(); err != nil {
		return nil, err
	}
	return m, nil
}

// httpsURL returns https://ip:port.
func httpsURL(ip string, port int) url.URL {
	return url.URL{Scheme: "https", Host: net.JoinHostPort(ip, strconv.Itoa(port))}
}

// Name returns the etcd member name.
func (m *Member) Name() string { return m.spec.MemberName }

// NodeName returns the name of the Node that hosts the member.
func (m *Member) NodeName() string { return m.spec.NodeName }

// IP returns the address the member listens on.
func (m *Member) IP() string { return m.spec.IP }

// ClientURL returns the member's client URL (https://ip:port).
func (m *Member) ClientURL() string { return m.client.String() }

// ClientAddress returns the member's client address as host:port, the target a kubelet
// stand-in forwards the etcd Pod's port 2379 to.
func (m *Member) ClientAddress() string { return m.client.Host }

// PeerURL returns the member's peer URL (https://ip:port).
func (m *Member) PeerURL() string { return m.peer.String() }

// DataDir returns the member's etcd data directory.
func (m *Member) DataDir() string { return filepath.Join(m.dir, "data") }

// ID returns the member ID, known once the member was added as a learner or has started for
// the first time.
func (m *Member) ID() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.id
}

// Running reports whether the member's etcd server is running. A member that was removed
// from the cluster (MemberRemove) stops its server by itself soon after, and is then not
// running either.
func (m *Member) Running() bool {
	if p := m.process(); p != nil {
		return !p.exited()
	}
	e := m.Etcd()
	if e == nil {
		return false
	}
	select {
	case <-e.Server.StopNotify():
		return false
	default:
		return true
	}
}

// Etcd returns the running embedded server, or nil; for assertions the client API cannot make.
// It is nil for a member run as a process of its own (Options.Binary).
func (m *Member) Etcd() *embed.Etcd {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etcd
}

// process returns the member's etcd process, or nil when it runs in process or not at all.
func (m *Member) process() *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

// leaderID is the member the running member knows as its leader, 0 when it knows none: the
// embedded server's raft state, or a process's own Status.
func (m *Member) leaderID() uint64 {
	if m.process() != nil {
		lead, _, _ := m.processStatus()
		return lead
	}
	if e := m.Etcd(); e != nil {
		return uint64(e.Server.Leader())
	}
	return 0
}

// isVoter reports whether the running member is a voting member by its own account.
func (m *Member) isVoter() bool {
	if p := m.process(); p != nil {
		if p.voter.Load() {
			return true
		}
		_, learner, ok := m.processStatus()
		p.voter.Store(ok && !learner)
		return ok && !learner
	}
	e := m.Etcd()
	return e != nil && isVoter(e)
}

// start starts the member's etcd server; it does not wait for it to join.
func (m *Member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etcd != nil || m.proc != nil {
		return fmt.Errorf("failed to start etcd member %s: already running", m.Name())
	}
	if m.wiped {
		return fmt.Errorf("failed to start etcd member %s: %w", m.Name(), ErrWiped)
	}
	if m.settings.binary != "" {
		p, err := m.startProcess()
		if err != nil {
			return err
		}
		m.proc = p
		return nil
	}
	e, err := embed.StartEtcd(m.embedConfig())
	if err != nil {
		return fmt.Errorf("failed to start etcd member %s: %w", m.Name(), err)
	}
	m.etcd = e
	m.id = uint64(e.Server.MemberID())
	return nil
}

// waitReady blocks until the member has joined the cluster and serves clients.
// Note: etcd's ReadyNotify needs a quorum, because the member publishes itself via raft.
func (m *Member) waitReady(ctx context.Context) error {
	if p := m.process(); p != nil {
		return m.waitProcessReady(ctx, p)
	}
	e := m.Etcd()
	if e == nil {
		return fmt.Errorf("etcd member %s is not running", m.Name())
	}
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd member %s failed while starting: %w", m.Name(), err)
	case <-e.Server.StopNotify():
		return fmt.Errorf("etcd member %s stopped while starting", m.Name())
	case <-ctx.Done():
		return fmt.Errorf("etcd member %s not ready: %w", m.Name(), context.Cause(ctx))
	}
}
