package kubeadm

import (
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func Test_coalesce(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	every := 5 * time.Second
	tests := []struct {
		name     string
		now      time.Time
		last     time.Time
		pending  bool
		wantCall bool
		wantWait time.Duration
	}{
		{name: "The first loss calls at once", now: t0, wantCall: true},
		{name: "A loss a whole interval after the last call calls at once", now: t0.Add(every), last: t0, wantCall: true},
		{name: "A loss long after the last call calls at once", now: t0.Add(time.Hour), last: t0, wantCall: true},
		{name: "A loss within the interval of the last call waits for the end of that interval", now: t0.Add(2 * time.Second), last: t0, wantWait: 3 * time.Second},
		{name: "A loss right after the last call waits the whole interval", now: t0, last: t0, wantWait: every},
		{name: "A loss while a trailing call is scheduled is covered by it", now: t0.Add(time.Second), last: t0.Add(every), pending: true},
		{name: "A scheduled trailing call covers a loss even past the interval", now: t0.Add(time.Hour), last: t0, pending: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			call, wait := coalesce(tt.now, tt.last, tt.pending, every)
			g.Expect(call).To(Equal(tt.wantCall))
			g.Expect(wait).To(Equal(tt.wantWait))
		})
	}
}

func TestCoalescer(t *testing.T) {
	g := NewWithT(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var calls atomic.Int32
	c := newCoalescer(func() { calls.Add(1) }, 5*time.Second, clk)

	t.Log("the first loss is reported at once")
	c.notify()
	g.Expect(calls.Load()).To(BeEquivalentTo(1))

	t.Log("a flapping connection within the interval makes one trailing call, at its end")
	for range 10 {
		clk.Step(100 * time.Millisecond)
		c.notify()
	}
	g.Expect(calls.Load()).To(BeEquivalentTo(1))
	clk.Step(3900 * time.Millisecond) // 4.9 s after the first call
	g.Expect(calls.Load()).To(BeEquivalentTo(1))
	clk.Step(100 * time.Millisecond)
	g.Expect(calls.Load()).To(BeEquivalentTo(2))

	t.Log("the trailing call starts a new interval")
	clk.Step(time.Second)
	c.notify()
	g.Expect(calls.Load()).To(BeEquivalentTo(2))
	clk.Step(4 * time.Second)
	g.Expect(calls.Load()).To(BeEquivalentTo(3))

	t.Log("a loss after a quiet interval is reported at once")
	clk.Step(time.Minute)
	c.notify()
	g.Expect(calls.Load()).To(BeEquivalentTo(4))

	t.Log("stop cancels the trailing call and drops later losses")
	c.notify()
	g.Expect(clk.HasWaiters()).To(BeTrue())
	c.stop()
	clk.Step(time.Minute)
	c.notify()
	g.Expect(calls.Load()).To(BeEquivalentTo(4))

	t.Log("a nil coalescer (no OnConnectionLost) ignores everything")
	var none *coalescer
	none.notify()
	none.stop()
}

func TestBackend_connectionLost(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w := startWorkloadCluster(t, workload, 3)
	var calls atomic.Int32
	b := w.backend(t, func(c *Config) { c.OnConnectionLost = func() { calls.Add(1) } })
	observeHealthy(ctx, g, b, 3)
	g.Expect(b.pool.size()).To(Equal(3))

	t.Log("closing idle connections is not a loss")
	b.pool.evictIdle(time.Now().Add(time.Hour))
	g.Expect(b.pool.size()).To(BeZero())
	g.Consistently(calls.Load).WithTimeout(2 * time.Second).Should(BeZero())

	t.Log("a member's etcd stopping is reported through its kept connection")
	observeHealthy(ctx, g, b, 3)
	member := w.etcd.MemberOnNode(w.nodes[0])
	g.Expect(member.Stop()).To(Succeed())
	// Note: gRPC keep-alive alone would notice a dead tunnel only after 40 s (keepAliveTime +
	// keepAliveTimeout); the GOAWAY of the stopping etcd and the closed port-forward stream end
	// the transport at once.
	g.Eventually(calls.Load).WithTimeout(20 * time.Second).Should(BeNumerically(">=", 1))

	t.Log("closing the backend is not a loss")
	g.Expect(member.Restart(ctx)).To(Succeed())
	observeHealthy(ctx, g, b, 3)
	g.Expect(b.pool.size()).To(Equal(3))
	g.Eventually(func() bool {
		b.lost.mu.Lock()
		defer b.lost.mu.Unlock()
		return b.lost.pending
	}).WithTimeout(10*time.Second).Should(BeFalse(), "no trailing call of the stop left")
	before := calls.Load()
	g.Expect(b.Close()).To(Succeed())
	g.Consistently(calls.Load).WithTimeout(2 * time.Second).Should(Equal(before))
}

// TestBackend_lostConnectionIsNotRedialled: a kept member connection that ends is closed and
// forgotten, so nothing dials that member again until the next observation asks it. gRPC's own
// reconnection (1 s backoff, growing) would otherwise open a port-forward through the workload
// apiserver again and again for as long as the member stays down: with many clusters whose
// members failed at once, those dials load the apiservers the next observations go through.
func TestBackend_lostConnectionIsNotRedialled(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w := startWorkloadCluster(t, workload, 3)
	var calls atomic.Int32
	b := w.backend(t, func(c *Config) { c.OnConnectionLost = func() { calls.Add(1) } })
	observeHealthy(ctx, g, b, 3)
	node := w.nodes[0]
	kubelet := w.kubelet(node)

	g.Expect(w.etcd.MemberOnNode(node).Stop()).To(Succeed())
	g.Eventually(calls.Load).WithTimeout(20 * time.Second).Should(BeNumerically(">=", 1))
	g.Eventually(b.pool.size).WithTimeout(5*time.Second).Should(Equal(2), "the lost member's client is dropped")
	dials := kubelet.PortForwards()
	// gRPC's first reconnection comes after 1 s (±20%), the next about 1.6 s later.
	g.Consistently(kubelet.PortForwards).WithTimeout(6*time.Second).Should(Equal(dials),
		"no port-forward to Node %s without an observation", node)

	t.Log("the next observation dials the member once more and finds it down")
	snap, err := b.Observe(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kubelet.PortForwards()).To(BeNumerically(">", dials))
	g.Expect(snap.Evidence).To(ContainElement(SatisfyAll(
		HaveField("NodeName", node), HaveField("Contact", etcd.ContactUnreachable))))
}
