package workload

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkStart times a whole 3-member workload cluster of each flavour, one at a time, from
// nothing (assets built) to ready: the kubeadm flavour until the etcd Pods and kubelets are
// up, the K3s flavour until every Node is annotated with its voter condition. The goal is
// under 10 s on 2 cores.
func BenchmarkStart(b *testing.B) {
	starters := []struct {
		name  string
		start func(context.Context) (interface{ Close() error }, error)
	}{
		{"kubeadm", func(ctx context.Context) (interface{ Close() error }, error) {
			return StartKubeadm(ctx, KubeadmOptions{Members: 3})
		}},
		{"k3s-v1.34.2", func(ctx context.Context) (interface{ Close() error }, error) {
			return StartK3s(ctx, K3sOptions{Members: 3, Tick: 200 * time.Millisecond})
		}},
	}
	for _, s := range starters {
		b.Run(s.name, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				start := time.Now()
				c, err := s.start(ctx)
				elapsed := time.Since(start)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				total += elapsed
				b.StopTimer()
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/ready")
			fmt.Printf("3-member %s workload cluster ready in %v (mean of %d)\n", s.name, (total / time.Duration(b.N)).Round(time.Millisecond), b.N)
		})
	}
}
