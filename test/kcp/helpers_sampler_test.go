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

// report prints, for the samples of one step, every change of any side's EtcdClusterHealthy
// (KCP, the ControlPlaneEtcd status, a fresh observation) and every sample where etcd-adapter
// disagrees with KCP (with etcd-adapter's evidence), and returns how many samples disagreed.
func report(step string, samples []view) (cpeDisagree, freshDisagree int) {
	var last, lastCPE, lastFresh string
	for _, v := range samples {
		k := fmt.Sprintf("%s/%s", v.kcpCluster.Status, v.kcpCluster.Reason)
		c := fmt.Sprintf("%s/%s", v.cpe.cluster.Status, v.cpe.cluster.Reason)
		a := fmt.Sprintf("%s/%s", v.adapter.Cluster.Status, v.adapter.Cluster.Reason)
		if now := k + c + a + fmt.Sprint(v.machines, v.cpe.members, v.members); now != last {
			fmt.Printf("[%s] %s machines=%v KCP=%s | ControlPlaneEtcd members=%v %s | fresh members=%v %s\n",
				step, v.at.Format("15:04:05.000"), v.machines, k, v.cpe.members, c, v.members, a)
			last = now
		}
		if !same(v.cpe.cluster, v.kcpCluster) {
			cpeDisagree++
		}
		// Note: a difference is printed when it first appears or its messages change, not for
		// every sample it lasts.
		if d := v.kcpCluster.Message + v.cpe.cluster.Message + v.cpe.describe(); !same(v.cpe.cluster, v.kcpCluster) && d != lastCPE {
			lastCPE = d
			fmt.Printf("[%s]   ControlPlaneEtcd differs at %s: KCP %q; ControlPlaneEtcd %q; its members: %s\n",
				step, v.at.Format("15:04:05.000"), oneLine(v.kcpCluster.Message), oneLine(v.cpe.cluster.Message), v.cpe.describe())
		}
		if !same(v.kcpCluster, v.adapter.Cluster) {
			freshDisagree++
		}
		if d := v.kcpCluster.Message + v.adapter.Cluster.Message + v.evidence(); !same(v.kcpCluster, v.adapter.Cluster) && d != lastFresh {
			lastFresh = d
			fmt.Printf("[%s]   fresh Observe differs at %s: KCP %q; etcd-adapter %q; etcd-adapter's evidence: %s\n",
				step, v.at.Format("15:04:05.000"), oneLine(v.kcpCluster.Message), oneLine(v.adapter.Cluster.Message), v.evidence())
		}
	}
	fmt.Printf("[%s] %d samples; EtcdClusterHealthy differs from KCP's in %d (ControlPlaneEtcd status) and %d (fresh Observe)\n",
		step, len(samples), cpeDisagree, freshDisagree)
	return cpeDisagree, freshDisagree
}

// firstSettled returns the first sample in which settled holds.
func firstSettled(samples []view, settled func(view) bool) (view, bool) {
	for _, v := range samples {
		if settled(v) {
			return v, true
		}
	}
	return view{}, false
}

// settledFresh reports whether a fresh observation sees exactly the given members (KCP's
// Machines) and agrees with KCP's EtcdClusterHealthy.
func settledFresh(v view, machines []string) bool {
	return slices.Equal(v.members, machines) && slices.Equal(v.machines, machines) && same(v.kcpCluster, v.adapter.Cluster)
}
