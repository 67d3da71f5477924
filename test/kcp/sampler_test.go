package kcp

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// samplePeriod is how often the sampler reads both sides while KCP works.
const samplePeriod = 500 * time.Millisecond

// sampler reads KCP's and etcd-adapter's views side by side in the background, so that a step
// can be judged on everything seen during it, not only at its end.
type sampler struct {
	o      *observer
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	samples []view
	errs    int
}

func startSampler(ctx context.Context, o *observer) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{o: o, cancel: cancel, done: make(chan struct{})}
	go s.run(ctx)
	return s
}

func (s *sampler) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(samplePeriod)
	defer t.Stop()
	for {
		v, err := s.o.tryRead(ctx)
		s.mu.Lock()
		if err != nil {
			s.errs++
		} else {
			s.samples = append(s.samples, v)
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) stop() {
	s.cancel()
	<-s.done
}

// since returns the samples taken at or after t.
func (s *sampler) since(t time.Time) []view {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []view
	for _, v := range s.samples {
		if !v.at.Before(t) {
			out = append(out, v)
		}
	}
	return out
}

// report prints, for the samples of one step, every change of either side's EtcdClusterHealthy
// and every sample where they disagree (with etcd-adapter's message: its evidence), and returns
// how many samples disagreed.
func report(step string, samples []view) int {
	disagree := 0
	var lastK, lastA string
	for _, v := range samples {
		k := fmt.Sprintf("%s/%s", v.kcpCluster.Status, v.kcpCluster.Reason)
		a := fmt.Sprintf("%s/%s", v.adapter.Cluster.Status, v.adapter.Cluster.Reason)
		if k != lastK || a != lastA {
			fmt.Printf("[%s] %s machines=%v members=%v KCP=%s adapter=%s\n", step, v.at.Format("15:04:05.000"), v.machines, v.members, k, a)
			lastK, lastA = k, a
		}
		if !same(v.kcpCluster, v.adapter.Cluster) {
			disagree++
			fmt.Printf("[%s]   differ at %s: KCP %q; etcd-adapter %q; etcd-adapter's evidence: %s\n",
				step, v.at.Format("15:04:05.000"), oneLine(v.kcpCluster.Message), oneLine(v.adapter.Cluster.Message), v.evidence())
		}
	}
	fmt.Printf("[%s] %d samples, %d with a different EtcdClusterHealthy\n", step, len(samples), disagree)
	return disagree
}

// firstSettled returns the first sample at or after t in which etcd-adapter sees exactly the
// given members (KCP's Machines) and agrees with KCP's EtcdClusterHealthy.
func firstSettled(samples []view, machines []string) (view, bool) {
	for _, v := range samples {
		if slices.Equal(v.members, machines) && slices.Equal(v.machines, machines) && same(v.kcpCluster, v.adapter.Cluster) {
			return v, true
		}
	}
	return view{}, false
}
