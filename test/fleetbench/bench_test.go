package fleetbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/managerproc"
)

const (
	// clockTicks is the kernel's USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
	clockTicks = 100
	// settle is the pause between growing the fleet and sampling the manager's CPU.
	settle = 10 * time.Second
	// idleConnTimeout is how long an idle HTTP connection stays in a client-go transport's pool
	// (net/http's DefaultTransport.IdleConnTimeout, which client-go keeps).
	idleConnTimeout = 90 * time.Second
	// http2HealthCheck is how long golang.org/x/net/http2 (v0.57 to at least v0.62) keeps a
	// transport after its last connection closed: the read loop re-arms its health-check timer
	// (client-go's ReadIdleTimeout, 30 s) on the read that ends it and never stops it, and the
	// timer's ping on the closed connection holds the connection and so its transport with its
	// TLS configuration (golang/go#80920). Plus client-go's PingTimeout, 15 s.
	http2HealthCheck = 45 * time.Second
)

// BenchmarkFleet runs the etcd-adapter manager binary (a separate process, so its CPU and memory
// are its own) against a fleet of workload clusters per backend (FLEET_BACKENDS, default
// "k3s,kubeadm"), each cluster with its own apiserver and 3-member etcd: K3s-flavoured ones with
// the K3s simulator, kubeadm-flavoured ones with etcd behind the apiserver's port-forward (the
// manager keeps a TLS connection per member). For N = 1, 5, 10, 20 clusters (FLEET_SIZES
// overrides, e.g. "1,5"), growing the fleet between sizes, it prints per size the manager's
// CPU-seconds per minute over a quiet window (FLEET_WINDOW, default 1m), its resident memory,
// Go heap in use, open file descriptors and goroutines, and status freshness: the time from the
// etcd member on Node cp-2 stopping on every cluster at once to each ControlPlaneEtcd saying so,
// then the same with the member stopping on the first workload cluster only (its FLEET_SHARE
// Clusters) while the rest of the fleet goes on. From the slope it estimates 1,000 clusters on
// one manager. At the largest size it then adds worker Nodes to every cluster (FLEET_WORKERS,
// default "0,100,500" per cluster; stand-in Node objects with a kubelet's status) and measures
// again. Last, it deletes every Cluster and samples the manager three times, up to 4 minutes
// later: it should come back to its baseline (taken before the first cluster). FLEET_SHARD=1
// then runs the K3s fleet's sharding check (two managers by --watch-filter).
func BenchmarkFleet(b *testing.B) {
	sizes := fleetInts(b, "FLEET_SIZES", []int{1, 5, 10, 20}, 1)
	workers := fleetInts(b, "FLEET_WORKERS", []int{0, 100, 500}, 0)
	share := fleetInts(b, "FLEET_SHARE", []int{1}, 1)[0]
	backends := []v1alpha1.Backend{v1alpha1.BackendK3s, v1alpha1.BackendKubeadm}
	if s := os.Getenv("FLEET_BACKENDS"); s != "" {
		backends = nil
		for _, f := range strings.Split(s, ",") {
			backends = append(backends, v1alpha1.Backend(strings.TrimSpace(f)))
		}
	}
	// One minute: the ControlPlaneEtcds' default observation interval is 30 s, so a shorter
	// window would alias with it.
	window := time.Minute
	if w := os.Getenv("FLEET_WINDOW"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil {
			b.Fatal(err)
		}
		window = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 140*time.Minute)
	defer cancel()
	mgmt := startManagement(ctx, b)
	for range b.N {
		dir := b.TempDir()
		bin, err := managerproc.Build(ctx, dir, mgmt.Config)
		if err != nil {
			b.Fatal(err)
		}
		for _, backend := range backends {
			if err := runFleet(ctx, mgmt, bin, dir, backend, share, sizes, workers, window); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// runFleet measures one backend's fleet with a manager of its own.
func runFleet(ctx context.Context, mgmt *env.Management, bin managerproc.Binary, dir string, backend v1alpha1.Backend, share int, sizes, workers []int, window time.Duration) (err error) {
	f := &fleet{mgmt: mgmt, ns: "fleet-" + string(backend) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36), backend: backend, share: share}
	if err := f.mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.close()) }()
	proc, err := startManagerProcess(ctx, bin, dir, "all")
	if err != nil {
		return err
	}
	defer func() {
		if proc != nil {
			err = errors.Join(err, proc.Stop())
		}
	}()
	// The baseline: the manager ready, no workload cluster yet, after the same settling time
	// as every other sample.
	if err := sleep(ctx, settle); err != nil {
		return err
	}
	base, err := proc.sample()
	if err != nil {
		return err
	}
	baseGroups, err := proc.goroutineGroups()
	if err != nil {
		return err
	}
	if err := saveHeapProfile(proc, string(backend)+"-baseline"); err != nil {
		return err
	}
	fmt.Printf("fleet %s baseline: RSS %.1f MiB  heap %.1f MiB (live objects %.1f)  fds %d  goroutines %d\n", backend, base.rssMiB, base.heapMiB, base.liveMiB, base.fds, base.goroutines)
	var rows []fleetRow
	for _, n := range sizes {
		if err := f.grow(ctx, n); err != nil {
			return err
		}
		row, err := f.measure(ctx, proc, window)
		if err != nil {
			return err
		}
		rows = append(rows, row)
		printRow(backend, row)
		if err := saveHeapProfile(proc, fmt.Sprintf("%s-N%d", backend, n)); err != nil {
			return err
		}
	}
	printEstimate(backend, rows)
	var byWorkers []fleetRow
	for _, w := range workers {
		if w == 0 && len(rows) > 0 {
			byWorkers = append(byWorkers, rows[len(rows)-1])
			continue
		}
		if err := f.addWorkers(ctx, w); err != nil {
			return err
		}
		row, err := f.measure(ctx, proc, window)
		if err != nil {
			return err
		}
		byWorkers = append(byWorkers, row)
		printRow(backend, row)
		if err := saveHeapProfile(proc, fmt.Sprintf("%s-N%d-W%d", backend, row.n, w)); err != nil {
			return err
		}
	}
	printWorkerSlope(backend, byWorkers)
	if err := f.deleteAll(ctx); err != nil {
		return err
	}
	// Sampled when the idle connections have closed, when the HTTP/2 health checks that hold
	// their transports have run, and once more after the runtime had time to return freed memory
	// to the system (its background scavenger).
	gone := time.Now()
	for _, at := range []time.Duration{idleConnTimeout + settle, idleConnTimeout + http2HealthCheck + settle, 4 * time.Minute} {
		if err := sleep(ctx, time.Until(gone.Add(at))); err != nil {
			return err
		}
		after, err := proc.sample()
		if err != nil {
			return err
		}
		fmt.Printf("fleet %s %v after deleting the %d Clusters: RSS %.1f MiB (baseline %.1f)  heap %.1f MiB (baseline %.1f)  live objects %.1f MiB (baseline %.1f)  fds %d (baseline %d)  goroutines %d (baseline %d)\n",
			backend, at, f.n, after.rssMiB, base.rssMiB, after.heapMiB, base.heapMiB, after.liveMiB, base.liveMiB, after.fds, base.fds, after.goroutines, base.goroutines)
	}
	if err := saveHeapProfile(proc, string(backend)+"-deleted"); err != nil {
		return err
	}
	afterGroups, err := proc.goroutineGroups()
	if err != nil {
		return err
	}
	printGoroutineGrowth(backend, baseGroups, afterGroups)
	if backend == v1alpha1.BackendK3s && os.Getenv("FLEET_SHARD") == "1" {
		if err := proc.Stop(); err != nil {
			return err
		}
		proc = nil
		for i := range f.n {
			if err := f.register(ctx, i); err != nil {
				return err
			}
		}
		return f.shard(ctx, bin, dir, window)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// fleetInts reads a comma-separated list of numbers of at least min from the environment.
func fleetInts(b *testing.B, name string, def []int, minimum int) []int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < minimum {
			b.Fatalf("%s: %q is not a number of at least %d", name, f, minimum)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
