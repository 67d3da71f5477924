package kcp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// guardPoll is how often a memberGuard checks whether its member applied its own removal.
const guardPoll = 2 * time.Millisecond

// memberGuard is a TCP proxy in front of one member's client port, the target of the etcd
// Pod's port-forward. It exists because of an in-process hazard, not to change behaviour:
// etcd v3.6 panics ("failed to find local ID in cluster members") on a Status call to a member
// that applied its own removal and has not stopped yet. In a real cluster that only crashes
// the removed member's etcd; here it would end the whole test binary. KCP removes members
// itself and then still dials the deleting Machine's Node, and nothing can serialize KCP's
// calls, so the guard cuts the member off (closes every connection and refuses new ones) as
// soon as it sees the member gone from its own member list. Clients see what they would see
// from a crashed etcd: the connection drops.
//
// To narrow the window further the guard also watches the leader: the leader applies a
// membership change before the followers learn it is committed, so a removal seen in the
// leader's member list cuts the follower off before it applies its own removal. The guard then
// stops the member at once, as a real removed etcd stops itself soon after; a member stopped
// before it applied its removal never reaches the panic.
//
// Note: this narrows the window (to the poll period when the member applies its removal as
// soon as the leader does); it cannot close it.
type memberGuard struct {
	member *etcdcluster.Member
	// peers returns every member of the cluster, for the leader's view.
	peers    func() []*etcdcluster.Member
	listener net.Listener
	stopped  chan struct{}
	wg       sync.WaitGroup

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	removed bool
}

func startGuard(m *etcdcluster.Member, peers func() []*etcdcluster.Member) (*memberGuard, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("failed to listen for the etcd guard of %s: %w", m.Name(), err)
	}
	g := &memberGuard{member: m, peers: peers, listener: ln, stopped: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	g.wg.Go(g.accept)
	g.wg.Go(g.watch)
	return g, nil
}

// Address is the guard's host:port.
func (g *memberGuard) Address() string { return g.listener.Addr().String() }

func (g *memberGuard) accept() {
	for {
		c, err := g.listener.Accept()
		if err != nil {
			return
		}
		g.wg.Go(func() { g.proxy(c) })
	}
}

// proxy copies between the client and the member until either side closes.
func (g *memberGuard) proxy(c net.Conn) {
	upstream, err := net.Dial("tcp", g.member.ClientAddress())
	if err != nil || !g.track(c, upstream) {
		_ = c.Close()
		if upstream != nil {
			_ = upstream.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, upstream); done <- struct{}{} }()
	<-done
	g.untrack(c, upstream)
}

// track records both ends, unless the member is already cut off.
func (g *memberGuard) track(conns ...net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed {
		return false
	}
	for _, c := range conns {
		g.conns[c] = struct{}{}
	}
	return true
}

func (g *memberGuard) untrack(conns ...net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
		delete(g.conns, c)
	}
}

// watch cuts the member off and stops it once the leader's member list or its own no longer
// has it.
func (g *memberGuard) watch() {
	t := time.NewTicker(guardPoll)
	defer t.Stop()
	for {
		select {
		case <-g.stopped:
			return
		case <-t.C:
		}
		if g.selfRemoved() || g.removedByLeader() {
			g.cutOff()
			// Note: Kill, not a graceful stop: a removed member has nothing to hand over.
			_ = g.member.Kill()
			return
		}
	}
}

func (g *memberGuard) selfRemoved() bool {
	e := g.member.Etcd()
	if e == nil || e.Server == nil {
		return false
	}
	return e.Server.Cluster().Member(e.Server.MemberID()) == nil
}

// removedByLeader reports whether a running member that leads (and lists itself) no longer
// lists this member.
func (g *memberGuard) removedByLeader() bool {
	e := g.member.Etcd()
	if e == nil || e.Server == nil || g.peers == nil {
		return false
	}
	self := e.Server.MemberID()
	for _, p := range g.peers() {
		if p == g.member || !p.Running() {
			continue
		}
		pe := p.Etcd()
		if pe == nil || pe.Server == nil {
			continue
		}
		id := pe.Server.MemberID()
		if pe.Server.Leader() != id || pe.Server.Cluster().Member(id) == nil {
			continue
		}
		return pe.Server.Cluster().Member(self) == nil
	}
	return false
}

func (g *memberGuard) cutOff() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removed = true
	for c := range g.conns {
		_ = c.Close()
	}
}

// Close stops the guard and closes every connection.
func (g *memberGuard) Close() error {
	select {
	case <-g.stopped:
		return nil
	default:
	}
	close(g.stopped)
	err := g.listener.Close()
	g.cutOff()
	g.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("failed to stop the etcd guard of %s: %w", g.member.Name(), err)
	}
	return nil
}
