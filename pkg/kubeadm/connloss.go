package kubeadm

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/stats"
	"k8s.io/utils/clock"
)

// connectionLostEvery is the least time between two calls of Config.OnConnectionLost: a tunnel
// that connects and drops at once (a flapping member, a kubelet that keeps restarting) must not
// turn into a loop of observations.
const connectionLostEvery = 5 * time.Second

// connLossHandler is the gRPC stats.Handler of one member client: gRPC calls HandleConn with
// stats.ConnEnd whenever a transport of that client ends (grpc-go's http2Client.Close, which
// runs for a GOAWAY from a stopping etcd, an EOF from a closed port-forward stream and a failed
// keep-alive alike). It runs on gRPC's goroutines.
type connLossHandler struct {
	node string
	// forget drops the client from the pool (pool.forgetLost).
	forget func()
	// kept is set once the pool keeps the client (a connection lost while it is being dialled
	// fails that dial, whose caller sees it), and cleared before the backend closes the client
	// itself (Close, idle eviction, a member that left, a new CA, a broken or duplicate client
	// replaced): those ends are not losses.
	kept atomic.Bool
	// lost is told of every loss; nil when the backend's owner did not ask
	// (Config.OnConnectionLost).
	lost *coalescer
	log  logr.Logger
}

var _ stats.Handler = &connLossHandler{}

// TagRPC implements stats.Handler; RPCs are not looked at.
func (h *connLossHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return ctx
}

// HandleRPC implements stats.Handler; RPCs are not looked at.
func (h *connLossHandler) HandleRPC(context.Context, stats.RPCStats) {}

// TagConn implements stats.Handler.
func (h *connLossHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

// HandleConn drops the client and reports the end of a transport the backend did not close.
func (h *connLossHandler) HandleConn(_ context.Context, s stats.ConnStats) {
	// Only the first end counts: the client is no longer kept after it.
	if _, ok := s.(*stats.ConnEnd); !ok || !h.kept.CompareAndSwap(true, false) {
		return
	}
	h.log.V(4).Info("Lost etcd connection", "node", h.node)
	h.forget()
	h.lost.notify()
}

// coalescer calls fn when notified, at most once per every: a notification within every of the
// last call schedules one trailing call at the end of that interval (so a second member failing
// right after the first is not missed), and further notifications until then are covered by it.
// It is safe for concurrent use; the trailing call is a timer, not a goroutine waiting.
type coalescer struct {
	fn    func()
	every time.Duration
	clock clock.WithDelayedExecution

	mu      sync.Mutex
	last    time.Time // when fn was last called (or is scheduled to be)
	pending bool      // a trailing call is scheduled
	timer   clock.Timer
	stopped bool
}

func newCoalescer(fn func(), every time.Duration, c clock.WithDelayedExecution) *coalescer {
	return &coalescer{fn: fn, every: every, clock: c}
}

// notify calls fn now, or schedules it, or drops the notification, as coalesce says.
func (c *coalescer) notify() {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	now := c.clock.Now()
	callNow, wait := coalesce(now, c.last, c.pending, c.every)
	switch {
	case callNow:
		c.last = now
	case wait > 0:
		c.pending = true
		c.last = now.Add(wait)
		c.timer = c.clock.AfterFunc(wait, c.fire)
	}
	c.mu.Unlock()
	if callNow {
		c.fn()
	}
}

// fire is the trailing call. Note: it does not read the clock (a fake clock runs it while
// holding its own lock); the time of the call was recorded when it was scheduled.
func (c *coalescer) fire() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.pending = false
	c.timer = nil
	c.mu.Unlock()
	c.fn()
}

// stop cancels a scheduled call and drops every later notification.
func (c *coalescer) stop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// coalesce decides what a notification at now does, given when fn was last called (zero:
// never) and whether a trailing call is already scheduled: call fn now, or wait that long and
// call it then, or neither (callNow false and wait zero: the scheduled call covers it).
func coalesce(now, last time.Time, pending bool, every time.Duration) (callNow bool, wait time.Duration) {
	if pending {
		return false, 0
	}
	if last.IsZero() || now.Sub(last) >= every {
		return true, 0
	}
	return false, every - now.Sub(last)
}
