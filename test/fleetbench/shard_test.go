package fleetbench

import (
	"context"
	"fmt"
	"slices"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env/managerproc"
)

// shard labels the fleet's Clusters into two shards, runs one manager per shard
// (--watch-filter=a and =b), and shows they share the fleet without touching each other's
// Clusters: after a status change on every Cluster, each ControlPlaneEtcd was written by its
// shard's manager and never by the other.
func (f *fleet) shard(ctx context.Context, bin managerproc.Binary, dir string, window time.Duration) error {
	shardOf := func(i int) string { return string(rune('a' + i%2)) }
	for i := range f.n {
		c := &clusterv1.Cluster{}
		if err := f.mgmt.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: f.name(i)}, c); err != nil {
			return err
		}
		before := c.DeepCopy()
		c.Labels = map[string]string{clusterv1.WatchLabel: shardOf(i)}
		if err := f.mgmt.Client.Patch(ctx, c, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("failed to label Cluster %s: %w", c.Name, err)
		}
	}
	procs := map[string]*managerProcess{}
	defer func() {
		for _, p := range procs {
			_ = p.Stop()
		}
	}()
	for _, shard := range []string{"a", "b"} {
		p, err := startManagerProcess(ctx, bin, dir, shard)
		if err != nil {
			return err
		}
		procs[shard] = p
	}
	if _, err := f.freshness(ctx, len(f.workloads)); err != nil {
		return err
	}
	cpus := map[string]int64{}
	for shard, p := range procs {
		ticks, err := p.cpuTicks()
		if err != nil {
			return err
		}
		cpus[shard] = ticks
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(window):
	}
	list := &v1alpha1.ControlPlaneEtcdList{}
	if err := f.mgmt.Client.List(ctx, list, client.InNamespace(f.ns)); err != nil {
		return err
	}
	wrote := map[string]int{}
	for i := range list.Items {
		cpe := &list.Items[i]
		idx := f.index(cpe.Name)
		own, other := "etcd-adapter-"+shardOf(idx), "etcd-adapter-"+shardOf(idx+1)
		ms := managersOf(cpe)
		if slices.Contains(ms, other) {
			return fmt.Errorf("ControlPlaneEtcd %s of shard %s was written by %s", cpe.Name, shardOf(idx), other)
		}
		if slices.Contains(ms, own) {
			wrote[own]++
		}
	}
	for _, shard := range []string{"a", "b"} {
		after, err := procs[shard].cpuTicks()
		if err != nil {
			return err
		}
		rss, err := procs[shard].rssMiB()
		if err != nil {
			return err
		}
		fmt.Printf("fleet shard %s (--watch-filter=%s): wrote %d of %d ControlPlaneEtcds, none of the other shard's; CPU %.2f s/min, RSS %.1f MiB\n",
			shard, shard, wrote["etcd-adapter-"+shard], f.n, float64(after-cpus[shard])/clockTicks/window.Minutes(), rss)
	}
	return nil
}

// managersOf names the field managers that wrote obj.
func managersOf(obj client.Object) []string {
	var out []string
	for _, f := range obj.GetManagedFields() {
		if f.Manager != "" && f.Manager != "before-first-apply" {
			out = append(out, f.Manager)
		}
	}
	return out
}
