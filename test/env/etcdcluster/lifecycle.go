package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// ErrWiped is returned when restarting a member whose data was wiped.
var ErrWiped = errors.New("member data was wiped")

// Stop closes the member gracefully, as systemd stopping etcd does (SIGTERM to a process): a leader first hands
// leadership to another voter, in-flight requests get a grace period, and peers learn that
// the connection closed. Data is kept. Stopping a stopped member is a no-op.
func (m *Member) Stop() error {
	m.close()
	return nil
}

// Kill stops the member abruptly: a member run as a process of its own (Options.Binary) gets
// SIGKILL; an in-process member comes as close to it as an in-process server allows: its
// listeners are closed first, then the raft loop is stopped without leadership transfer.
// Note: unlike a real SIGKILL, an in-process member still runs etcd's shutdown of the storage
// backend, and established peer connections are closed (peers see EOF rather than a
// timeout). Data is kept. Killing a stopped member is a no-op.
func (m *Member) Kill() error {
	m.mu.Lock()
	e, p := m.etcd, m.proc
	m.proc = nil
	m.mu.Unlock()
	if p != nil {
		p.kill()
		return nil
	}
	if e == nil {
		return nil
	}
	for _, l := range e.Clients {
		_ = l.Close()
	}
	for _, p := range e.Peers {
		_ = p.Close()
	}
	e.Server.HardStop()
	m.close()
	return nil
}

// Restart stops the member if it runs, starts it again with the same data directory and
// ports, and waits until it serves clients. It keeps its member ID. The wait needs a quorum
// of running members, so restart the members of a cluster that lost quorum concurrently.
// A wiped member cannot be restarted (ErrWiped): see Wipe.
func (m *Member) Restart(ctx context.Context) error {
	m.close()
	if err := m.start(); err != nil {
		return err
	}
	return m.waitReady(ctx)
}

// Wipe stops the member gracefully and deletes its data directory, as when a disk is lost.
// The member stays in the cluster's member list, unreachable. Restart refuses it afterwards:
// an etcd member that lost its raft log but keeps its ID makes raft panic ("tocommit out of
// range"), which would end the whole test binary. A Node that comes back after losing its
// disk must have its old member removed and join again as a new learner (AddLearner), which
// is what kubeadm and K3s do.
func (m *Member) Wipe() error {
	m.close()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wiped = true
	if err := os.RemoveAll(m.DataDir()); err != nil {
		return fmt.Errorf("failed to wipe etcd member %s: %w", m.Name(), err)
	}
	return nil
}

// Wiped reports whether Wipe deleted the member's data.
func (m *Member) Wiped() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.wiped
}

// close shuts the server down gracefully and waits until all of its goroutines returned.
func (m *Member) close() {
	m.mu.Lock()
	e, p := m.etcd, m.proc
	m.etcd, m.proc = nil, nil
	m.mu.Unlock()
	if p != nil {
		p.stop()
		return
	}
	if e == nil {
		return
	}
	e.Close()
	// Close closes Err() once every server goroutine has exited; drain it so nothing blocks.
	for range e.Err() {
	}
}

// StopMember stops the named member gracefully and keeps its data; stopping a stopped member
// is not an error.
func (c *Cluster) StopMember(_ context.Context, name string) error {
	m := c.Member(name)
	if m == nil {
		return fmt.Errorf("failed to stop etcd member %s: no such member", name)
	}
	return m.Stop()
}
