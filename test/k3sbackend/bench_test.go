package k3sbackend_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// removalsMeasured is how many removals each iteration of BenchmarkRemovalNoticed times.
const removalsMeasured = 50

// BenchmarkRemovalNoticed measures how long after K3s (the simulator) writes
// removed-node-name the backend reports the removal, over 50 removals per iteration in a
// rolling replacement of a 3-server cluster (join a server, wait until it is a voter, remove
// the oldest). Every iteration goes on with the next oldest server, so no removal is timed
// twice. The backend reports Removed only once the evidence agrees with K3s's claim (the
// leader's next pass marks the Node NotAMember, and it stays so for one more pass), so the
// figure includes up to two simulated K3s ticks (200 ms each here; 15 s in K3s). The start is when the simulator's patch request leaves for the apiserver (and, as a
// second figure, when its response came back: the watch event can beat the response, so that
// figure can be negative); the end is when WaitForRemoval returns Removed, woken by the Node
// watch. cluster-api-k3s polls every 30 s here.
func BenchmarkRemovalNoticed(b *testing.B) {
	g := NewWithT(b)
	rec := &patchRecorder{sent: map[string]time.Time{}, acked: map[string]time.Time{}}
	c := startCluster(b, "v1.34.2+k3s1", 3, clusterOptions{noStrict: true, simTransport: rec.wrap})
	ctx := context.Background()
	var fromSent, fromAcked []time.Duration
	next := 0
	for b.Loop() {
		for range removalsMeasured {
			joined := fmt.Sprintf("cp-%d", len(c.nodes))
			c.join(ctx, g, joined)
			oldest := c.nodes[next]
			next++
			r, err := waitFor(ctx, c, c.memberOf(oldest))
			reported := time.Now()
			g.Expect(err).ToNot(HaveOccurred())
			g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
			// The watch event may arrive before the simulator has read its patch's response.
			var sent, acked time.Time
			g.Eventually(func() bool {
				sent, acked = rec.times(oldest)
				return !acked.IsZero()
			}, waitTimeout, time.Millisecond).Should(BeTrue(), "the simulator's removed-node-name patch for %s was not seen", oldest)
			fromSent, fromAcked = append(fromSent, reported.Sub(sent)), append(fromAcked, reported.Sub(acked))
		}
	}
	reportPercentiles(b, "from-sent", "removals", fromSent)
	reportPercentiles(b, "from-acked", "removals", fromAcked)
}

// waitFor waits for the removal of the member on node, bounded.
func waitFor(ctx context.Context, c *k3sCluster, m etcd.Member) (etcd.Removal, error) {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	return c.backend.WaitForRemoval(ctx, m)
}

// join starts a new server on node and waits until the backend sees it as a healthy voter.
func (c *k3sCluster) join(ctx context.Context, g Gomega, node string) {
	ip := fmt.Sprintf("127.0.0.%d", 10+len(c.ips))
	name, err := c.sim.JoinServer(ctx, node, ip)
	g.Expect(err).ToNot(HaveOccurred())
	c.nodes, c.ips[node] = append(c.nodes, node), ip
	g.Eventually(func(g Gomega) {
		s, err := c.backend.Observe(ctx)
		g.Expect(err).ToNot(HaveOccurred())
		m, ok := s.MemberByNode(node)
		g.Expect(ok).To(BeTrue())
		g.Expect(m.Name).To(Equal(name))
		g.Expect(m.IsLearner).To(BeFalse())
		ev, _ := s.EvidenceFor(m.ID)
		g.Expect(ev.Contact).To(Equal(etcd.ContactAnswered), ev.Error)
	}, waitTimeout, 20*time.Millisecond).Should(Succeed())
}

// minForP99 is the fewest samples whose 99th percentile is not simply the maximum.
const minForP99 = 100

// reportPercentiles reports the median and the maximum of ds in milliseconds, and the p99 when
// there are enough samples for one (with fewer, the "p99" would be the maximum).
func reportPercentiles(b *testing.B, name, of string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	pct := func(p float64) time.Duration { return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))] }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(pct(0.5)), name+"-median-ms")
	b.ReportMetric(ms(sorted[len(sorted)-1]), name+"-max-ms")
	p99 := "n/a (fewer than 100 samples)"
	if len(sorted) >= minForP99 {
		b.ReportMetric(ms(pct(0.99)), name+"-p99-ms")
		p99 = pct(0.99).String()
	}
	b.Logf("%s over %d %s: median %v, p99 %s, min %v, max %v", name, len(ds), of, pct(0.5), p99, sorted[0], sorted[len(sorted)-1])
}

// patchRecorder records, per Node, when the simulator's JSON patch that adds removed-node-name
// was sent and when its response arrived.
type patchRecorder struct {
	mu          sync.Mutex
	sent, acked map[string]time.Time
}

func (p *patchRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		node, ok := removedNodeNamePatch(req)
		if !ok {
			return rt.RoundTrip(req)
		}
		sent := time.Now()
		resp, err := rt.RoundTrip(req)
		acked := time.Now()
		if err == nil && resp.StatusCode < 300 {
			p.mu.Lock()
			p.sent[node], p.acked[node] = sent, acked
			p.mu.Unlock()
		}
		return resp, err
	})
}

func (p *patchRecorder) times(node string) (sent, acked time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent[node], p.acked[node]
}

// removedNodeNamePatch returns the Node a request patches when it is a JSON patch that adds a
// removed-node-name annotation; the body is restored for the real request.
func removedNodeNamePatch(req *http.Request) (string, bool) {
	if req.Method != http.MethodPatch || !strings.Contains(req.URL.Path, "/api/v1/nodes/") || req.Body == nil {
		return "", false
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return "", false
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	var ops []struct{ Op, Path string }
	if json.Unmarshal(body, &ops) != nil {
		return "", false
	}
	for _, op := range ops {
		if op.Op == "add" && strings.HasSuffix(op.Path, "~1removed-node-name") {
			return req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:], true
		}
	}
	return "", false
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// observeRounds is how many Observe calls BenchmarkObserve5Nodes averages over.
const observeRounds = 500

// BenchmarkObserve5Nodes measures what one Observe of a 5-server cluster costs in wall time
// (one live List of the etcd Nodes plus the assessment), and what a RemoveMember call costs
// once K3s reported the removal (served from the Node cache, which is what each watch event
// costs). Allocations are measured apart, on the call alone: BenchmarkObserve_allocs.
func BenchmarkObserve5Nodes(b *testing.B) {
	g := NewWithT(b)
	c := startCluster(b, "v1.34.2+k3s1", 5, clusterOptions{noStrict: true})
	ctx := context.Background()
	for b.Loop() {
		var times []time.Duration
		for range observeRounds {
			start := time.Now()
			s, err := c.backend.Observe(ctx)
			times = append(times, time.Since(start))
			g.Expect(err).ToNot(HaveOccurred())
			g.Expect(s.Members).To(HaveLen(5))
		}
		reportPercentiles(b, "observe", "calls", times)

		// What a watch event costs once K3s reported: RemoveMember answers from the cache.
		node := c.follower(g)
		r, err := waitFor(ctx, c, c.memberOf(node))
		g.Expect(err).ToNot(HaveOccurred())
		g.Expect(r.State).To(Equal(etcd.RemovalRemoved))
		times = times[:0]
		for range observeRounds {
			start := time.Now()
			r, err := c.backend.RemoveMember(ctx, c.memberOf(node))
			times = append(times, time.Since(start))
			g.Expect(err).ToNot(HaveOccurred())
			g.Expect(r.State).To(Equal(etcd.RemovalRemoved))
		}
		reportPercentiles(b, "removed-check", "calls", times)
	}
}
