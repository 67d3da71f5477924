package k3ssim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
)

// server is one simulated K3s server: a Node, an advertise IP and the etcd member it runs.
type server struct {
	node   string
	ip     string
	member string
	// running is false once K3s tombstoned its etcd after the member was removed.
	running bool
	// profile is the version this server's K3s runs.
	profile Profile
	// etcdOnly is a server that runs no apiserver (--disable-apiserver).
	etcdOnly bool
}

// peerIP returns the advertise IP of a member, the host of its first peer URL.
func peerIP(m member) (string, error) {
	if len(m.PeerURLs) == 0 {
		return "", fmt.Errorf("etcd member %q has no peer URL", m.Name)
	}
	u, err := url.Parse(m.PeerURLs[0])
	if err != nil {
		return "", fmt.Errorf("failed to parse peer URL of etcd member %q: %w", m.Name, err)
	}
	return u.Hostname(), nil
}

// syncServersLocked is every running server's per-tick work: a server whose member is no longer in
// the member list tombstones itself (its etcd stops, its Node goes NotReady); the others
// re-assert their Node metadata. It returns the member list, or nil when etcd did not answer.
// The caller holds opMu.
func (s *Simulator) syncServersLocked(ctx context.Context) []member {
	members, err := s.etcd.members(ctx)
	if err != nil {
		s.log.Error(err, "Skipping tick")
		return nil
	}
	byName := map[string]member{}
	for _, m := range members {
		byName[m.Name] = m
	}
	for _, srv := range s.runningServers() {
		m, ok := byName[srv.member]
		if !ok {
			s.tombstoneLocked(ctx, srv.member)
			continue
		}
		if m.IsLearner && !srv.etcdOnly {
			// A server that runs an apiserver: the apiserver waits for its own etcd, which
			// serves only once promoted, so node-name is not written yet.
			continue
		}
		if err := s.syncMetadata(ctx, srv); err != nil {
			s.log.Error(err, "Failed to sync Node metadata", "node", srv.node)
		}
	}
	return members
}

// runningServers returns copies of the servers whose K3s runs.
func (s *Simulator) runningServers() []server {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []server
	for _, srv := range s.servers {
		if srv.running {
			out = append(out, *srv)
		}
	}
	return out
}

// serverForMember returns a copy of the server running member name.
func (s *Simulator) serverForMember(name string) (server, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, srv := range s.servers {
		if srv.member == name {
			return *srv, true
		}
	}
	return server{}, false
}

// tombstoneLocked is what the removed server's K3s does (k3s pkg/etcd/etcd.go, the
// removed member's tombstone): it closes its etcd, and because its apiserver only talks to that member,
// its kubelet loses the API and the Node goes NotReady. K3s never deletes the Node.
// The caller holds opMu.
func (s *Simulator) tombstoneLocked(ctx context.Context, memberName string) {
	s.mu.Lock()
	var srv *server
	for _, candidate := range s.servers {
		if candidate.member == memberName && candidate.running {
			srv = candidate
		}
	}
	if srv != nil {
		srv.running = false
	}
	s.mu.Unlock()
	if srv == nil {
		return
	}
	s.log.Info("Etcd member removed, tombstoning server", "node", srv.node, "memberName", memberName)
	if err := s.opts.Etcd.StopMember(ctx, s.etcd.etcdName(memberName)); err != nil {
		s.log.Error(err, "Failed to stop etcd of removed member", "memberName", memberName)
	}
	if err := s.kubelet.Stop(ctx, srv.node); err != nil {
		s.log.Error(err, "Failed to stop kubelet", "node", srv.node)
	}
}

// RestartServer starts the K3s of a server whose member was removed: K3s moves the old data
// aside, picks a new member name `<node>-<8 hex>`, joins as a learner (MemberAddAsLearner and
// start), the kubelet gets its API back (Node Ready) and the metadata controller writes the new
// node-name/node-address. The leader promotes the learner on a later tick. It returns the new
// member name.
func (s *Simulator) RestartServer(ctx context.Context, node string) (string, error) {
	s.mu.Lock()
	var srv server
	p, ok := s.servers[node]
	if ok {
		srv = *p
	}
	s.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("no simulated server for Node %s", node)
	}
	if srv.running {
		return "", fmt.Errorf("server %s still runs etcd member %s; only a removed server rejoins", node, srv.member)
	}
	if s.opts.TombstoneBlocksRestart {
		return "", fmt.Errorf("server %s: %w", node, ErrTombstone)
	}
	return s.join(ctx, node, srv.ip, srv.etcdOnly)
}

// JoinServer starts a new K3s server on Node node advertising ip: it joins etcd as a learner
// under a fresh member name and registers its Node. It returns the member name.
func (s *Simulator) JoinServer(ctx context.Context, node, ip string) (string, error) {
	return s.joinNew(ctx, node, ip, false)
}

// JoinEtcdOnlyServer is JoinServer for a server that runs no apiserver (K3s
// --disable-apiserver): its metadata controller reaches the cluster through another server, so
// its Node shows node-name while its member is still a learner (EtcdIsVoter MemberIsLearner).
func (s *Simulator) JoinEtcdOnlyServer(ctx context.Context, node, ip string) (string, error) {
	return s.joinNew(ctx, node, ip, true)
}

// joinNew registers the Node of a server that does not exist yet and joins it.
func (s *Simulator) joinNew(ctx context.Context, node, ip string, etcdOnly bool) (string, error) {
	s.mu.Lock()
	_, exists := s.servers[node]
	s.mu.Unlock()
	if exists {
		return "", fmt.Errorf("server %s exists; use RestartServer", node)
	}
	if err := s.registerNode(ctx, node, ip); err != nil {
		return "", err
	}
	return s.join(ctx, node, ip, etcdOnly)
}

// ErrTombstone is RestartServer's refusal on a K3s that does not rejoin on its own after its
// member was removed: it refuses to start while the tombstone its etcd left is in the data
// directory, until an administrator clears it.
var ErrTombstone = errors.New("etcd tombstone file has been detected: this server's etcd member was removed; clear its data directory to join again")

// join adds node's etcd as a learner under a new member name and marks the server running.
func (s *Simulator) join(ctx context.Context, node, ip string, etcdOnly bool) (string, error) {
	name, err := newMemberName(node)
	if err != nil {
		return "", err
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if err := s.opts.Etcd.JoinLearner(ctx, name, ip); err != nil {
		return "", fmt.Errorf("failed to join server %s as etcd learner %s: %w", node, name, err)
	}
	s.mu.Lock()
	srv := server{node: node, ip: ip, member: name, running: true, profile: s.profileFor(node), etcdOnly: etcdOnly}
	s.servers[node] = &srv
	s.mu.Unlock()
	if err := s.kubelet.Start(ctx, node); err != nil {
		return name, fmt.Errorf("failed to start kubelet of %s: %w", node, err)
	}
	if !etcdOnly {
		// Its apiserver waits for its etcd, a learner until the leader promotes it; the
		// metadata controller runs once the apiserver is up (syncServersLocked).
		return name, nil
	}
	return name, s.syncMetadata(ctx, srv)
}

// newMemberName returns `<node>-<8 random hex>`, K3s's member naming.
func newMemberName(node string) (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("failed to pick a member name suffix: %w", err)
	}
	return node + "-" + hex.EncodeToString(b), nil
}
