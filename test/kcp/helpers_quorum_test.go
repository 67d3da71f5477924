package kcp

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// quorumSample is one reading of etcd's raft membership against which members run: voters is
// the number of voting members in the member list (as the leader, or any running voter, holds
// it) and running how many of them have a running server.
type quorumSample struct {
	at      time.Time
	voters  int
	running int
}

// margin is how many more running voters there are than a quorum needs: negative means the
// cluster could not commit anything.
func (s quorumSample) margin() int { return s.running - (s.voters/2 + 1) }

// quorumLog samples etcd's quorum in the background from the embedded servers' own raft state
// (not through etcd-adapter, nor through a client call that a loaded machine could time out),
// so that a step can assert that quorum held at every sample.
type quorumLog struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	samples []quorumSample
}

// quorumPoll is how often quorumLog samples.
const quorumPoll = 100 * time.Millisecond

func startQuorumLog(ctx context.Context, c *etcdcluster.Cluster) *quorumLog {
	ctx, cancel := context.WithCancel(ctx)
	l := &quorumLog{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTicker(quorumPoll)
		defer t.Stop()
		for {
			if s, ok := sampleQuorum(c); ok {
				l.mu.Lock()
				l.samples = append(l.samples, s)
				l.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return l
}

// sampleQuorum reads the member list of the leader (or, during an election, of the first
// running voter) and counts the voters whose server runs.
func sampleQuorum(c *etcdcluster.Cluster) (quorumSample, bool) {
	view := viewer(c)
	if view == nil {
		return quorumSample{}, false
	}
	e := view.Etcd()
	if e == nil {
		return quorumSample{}, false
	}
	running := map[uint64]bool{}
	for _, m := range c.Members() {
		if m.Running() {
			running[m.ID()] = true
		}
	}
	s := quorumSample{at: time.Now()}
	for _, m := range e.Server.Cluster().Members() {
		if m.IsLearner {
			continue
		}
		s.voters++
		if running[uint64(m.ID)] {
			s.running++
		}
	}
	return s, s.voters > 0
}

func viewer(c *etcdcluster.Cluster) *etcdcluster.Member {
	if l, err := c.Leader(); err == nil {
		return l
	}
	for _, m := range c.Members() {
		if e := m.Etcd(); e != nil && m.Running() {
			if self := e.Server.Cluster().Member(e.Server.MemberID()); self != nil && !self.IsLearner {
				return m
			}
		}
	}
	return nil
}

// lowest returns the sample with the smallest margin and how many samples there were.
func (l *quorumLog) lowest() (quorumSample, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var low quorumSample
	for i, s := range l.samples {
		if i == 0 || s.margin() < low.margin() {
			low = s
		}
	}
	return low, len(l.samples)
}

func (l *quorumLog) stop() {
	l.cancel()
	<-l.done
}

func (s quorumSample) String() string {
	return fmt.Sprintf("%d of %d voters running at %s (margin %d)", s.running, s.voters, s.at.Format("15:04:05.000"), s.margin())
}
