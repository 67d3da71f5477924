package hookbench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

const (
	// deletions per backend, as the issue asks for the median and p99 over 20.
	deletions = 20
	// failures per backend: each stops a member and waits for the status to say so.
	failures = 5
)

// BenchmarkHookRelease deletes the oldest control-plane Machine 20 times per backend (adding a
// member back after each, so every deletion starts from 3 healthy members) and prints, per
// backend, the time from the Machine entering WaitingForPreTerminateHook to etcd-adapter
// releasing its hook: leadership moved when needed, the member removed and confirmed. Then it
// stops a member 5 times and prints how long the ControlPlaneEtcd status took to say so.
func BenchmarkHookRelease(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	p := startPlatform(ctx, b)
	for _, backend := range []struct {
		name  string
		start func(context.Context, *testing.B, *platform) *cluster
	}{{"k3s", startK3s}, {"kubeadm", startKubeadm}} {
		b.Run(backend.name, func(b *testing.B) {
			c := backend.start(ctx, b, p)
			var hooks, fails []timing
			for range b.N {
				for i := range deletions {
					d, err := c.deleteOldest(ctx)
					if err != nil {
						b.Fatalf("deletion %d: %v", i+1, err)
					}
					hooks = append(hooks, d)
					if err := c.replace(ctx); err != nil {
						b.Fatalf("replacing after deletion %d: %v", i+1, err)
					}
				}
				for i := range failures {
					d, err := c.failAndRecover(ctx)
					if err != nil {
						b.Fatalf("failure %d: %v", i+1, err)
					}
					fails = append(fails, d)
				}
			}
			report(b, backend.name, hooks, fails)
		})
	}
}

func report(b *testing.B, backend string, hooks, fails []timing) {
	hm, hp, hx := stats(totals(hooks))
	om, op, ox := stats(owns(hooks))
	fm, _, fx := stats(totals(fails))
	fom, _, fox := stats(owns(fails))
	b.ReportMetric(ms(hm), "hook-median-ms")
	b.ReportMetric(ms(hp), "hook-p99-ms")
	b.ReportMetric(ms(om), "adapter-median-ms")
	b.ReportMetric(ms(op), "adapter-p99-ms")
	b.ReportMetric(ms(fm), "failure-median-ms")
	fmt.Printf("%s: WaitingForPreTerminateHook → hook released, %d deletions: median %v, p99 %v, max %v\n",
		backend, len(hooks), hm.Round(time.Millisecond), hp.Round(time.Millisecond), hx.Round(time.Millisecond))
	fmt.Printf("%s:   of which etcd-adapter's own (without K3s's time from remove=true to its evidence): median %v, p99 %v, max %v\n",
		backend, om.Round(time.Millisecond), op.Round(time.Millisecond), ox.Round(time.Millisecond))
	fmt.Printf("%s: member stopped → status says not healthy, %d failures (observationInterval %v): median %v, max %v\n",
		backend, len(fails), observationInterval, fm.Round(time.Millisecond), fx.Round(time.Millisecond))
	fmt.Printf("%s:   of which etcd-adapter's own (without K3s's time to write EtcdIsVoter): median %v, max %v\n",
		backend, fom.Round(time.Millisecond), fox.Round(time.Millisecond))
}

func totals(ts []timing) []time.Duration {
	out := make([]time.Duration, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.total)
	}
	return out
}

func owns(ts []timing) []time.Duration {
	out := make([]time.Duration, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.adapter())
	}
	return out
}

// stats returns the median, the 99th percentile (nearest rank; with 20 samples that is the
// largest) and the maximum.
func stats(ds []time.Duration) (median, p99, maxD time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (99*len(s) + 99) / 100 // ceil(0.99 n)
	return s[len(s)/2], s[rank-1], s[len(s)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
