package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/parentdeath"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
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
	for range b.N {
		dir := b.TempDir()
		bin, err := buildManager(ctx, dir)
		if err != nil {
			b.Fatal(err)
		}
		for _, backend := range backends {
			if err := runFleet(ctx, bin, dir, backend, share, sizes, workers, window); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// runFleet measures one backend's fleet with a manager of its own.
func runFleet(ctx context.Context, bin, dir string, backend v1alpha1.Backend, share int, sizes, workers []int, window time.Duration) (err error) {
	f := &fleet{ns: "fleet-" + string(backend) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36), backend: backend, share: share}
	if err := mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.close()) }()
	proc, err := startManagerProcess(ctx, bin, dir, "all")
	if err != nil {
		return err
	}
	defer func() {
		if proc != nil {
			err = errors.Join(err, proc.stop())
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
		if err := proc.stop(); err != nil {
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

// saveHeapProfile writes the manager's heap profile (for `go tool pprof`) and its goroutines
// into FLEET_PROFILES (when set), named after the sample.
func saveHeapProfile(proc *managerProcess, name string) error {
	dir := os.Getenv("FLEET_PROFILES")
	if dir == "" {
		return nil
	}
	profile, err := body("http://" + proc.profiler + "/debug/pprof/heap?gc=1")
	if err != nil {
		return fmt.Errorf("failed to read the manager's heap profile: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "heap-"+name+".pb.gz"), []byte(profile), 0o600); err != nil {
		return err
	}
	stacks, err := body("http://" + proc.profiler + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return fmt.Errorf("failed to read the manager's goroutine profile: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "goroutines-"+name+".txt"), []byte(stacks), 0o600)
}

// profileCPU starts a CPU profile of the manager over the next d, saved into FLEET_PROFILES (when
// set) as cpu-<name>.pb.gz; the returned wait blocks until it is written.
func profileCPU(proc *managerProcess, name string, d time.Duration) (wait func() error) {
	dir := os.Getenv("FLEET_PROFILES")
	if dir == "" {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() {
		profile, err := body(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", proc.profiler, max(1, int(d.Seconds()))))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "cpu-"+name+".pb.gz"), []byte(profile), 0o600)
		}
		done <- err
	}()
	return func() error { return <-done }
}

func printRow(backend v1alpha1.Backend, row fleetRow) {
	fmt.Printf("fleet %-7s N=%-3d workers/cluster %-4d manager CPU %6.2f s/min (%.3f per cluster)  RSS %6.1f MiB  heap %6.1f MiB (live %6.1f)  fds %4d  goroutines %5d  freshness p50 %v max %v (meanwhile manager %.2f cores, machine %.0f%% busy), one workload cluster p50 %v max %v\n",
		backend, row.n, row.workers, row.cpuPerMin, row.cpuPerMin/float64(row.n), row.rssMiB, row.heapMiB, row.liveMiB, row.fds, row.goroutines,
		row.freshP50.Round(time.Millisecond), row.freshMax.Round(time.Millisecond), row.freshManagerCores, 100*row.freshMachineBusy,
		row.oneP50.Round(time.Millisecond), row.oneMax.Round(time.Millisecond))
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

type fleetRow struct {
	n, workers         int
	cpuPerMin          float64
	freshP50, freshMax time.Duration
	// oneP50 and oneMax are the freshness of a failure on one workload cluster (its share of
	// Clusters) while the rest of the fleet goes on as before: a member failing somewhere in a
	// fleet, rather than everywhere at once.
	oneP50, oneMax time.Duration
	// freshManagerCores and freshMachineBusy are the manager's CPU (in cores) and the share of
	// the machine's CPUs busy while the freshness measure ran: a manager far below its share of
	// a busy machine waited on the workload clusters, not on itself.
	freshManagerCores, freshMachineBusy float64
	sample
}

// machineCPU reads the machine's busy and total CPU time (clock ticks) from /proc/stat.
func machineCPU() (busy, total int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("failed to read the machine's CPU time: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	for i, f := range fields[1:] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("failed to parse /proc/stat line %q: %w", line, err)
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, nil
}

// sample is what the manager process holds at one moment.
type sample struct {
	// heapMiB is the Go heap's spans in use after a collection; liveMiB the objects in them.
	// Spans that keep a few objects after many Clusters went count whole in heapMiB.
	rssMiB, heapMiB, liveMiB float64
	fds, goroutines          int
}

// printEstimate fits CPU, memory, descriptors and goroutines to a line over the sizes and
// extrapolates to 1,000 clusters.
func printEstimate(backend v1alpha1.Backend, rows []fleetRow) {
	if len(rows) < 2 {
		return
	}
	x := func(r fleetRow) float64 { return float64(r.n) }
	cpuSlope, cpuBase := fit(rows, x, func(r fleetRow) float64 { return r.cpuPerMin })
	rssSlope, rssBase := fit(rows, x, func(r fleetRow) float64 { return r.rssMiB })
	fdSlope, fdBase := fit(rows, x, func(r fleetRow) float64 { return float64(r.fds) })
	gSlope, gBase := fit(rows, x, func(r fleetRow) float64 { return float64(r.goroutines) })
	fmt.Printf("fleet %s slope: %.3f CPU-s/min, %.2f MiB, %.1f fds, %.1f goroutines per cluster (base %.2f CPU-s/min, %.1f MiB, %.0f fds, %.0f goroutines); "+
		"1,000 clusters on one manager ≈ %.1f CPU-s/min (%.2f cores), %.0f MiB, %.0f fds, %.0f goroutines\n",
		backend, cpuSlope, rssSlope, fdSlope, gSlope, cpuBase, rssBase, fdBase, gBase,
		cpuBase+1000*cpuSlope, (cpuBase+1000*cpuSlope)/60, rssBase+1000*rssSlope, fdBase+1000*fdSlope, gBase+1000*gSlope)
}

// printWorkerSlope fits memory and CPU to the worker Nodes per cluster at the largest size.
func printWorkerSlope(backend v1alpha1.Backend, rows []fleetRow) {
	if len(rows) < 2 {
		return
	}
	x := func(r fleetRow) float64 { return float64(r.workers) }
	rssSlope, _ := fit(rows, x, func(r fleetRow) float64 { return r.rssMiB })
	heapSlope, _ := fit(rows, x, func(r fleetRow) float64 { return r.heapMiB })
	cpuSlope, _ := fit(rows, x, func(r fleetRow) float64 { return r.cpuPerMin })
	n := rows[0].n
	fmt.Printf("fleet %s workers: per 100 worker Nodes on each of %d clusters, RSS %+.2f MiB, heap %+.2f MiB, CPU %+.3f s/min (per cluster: %+.3f MiB RSS per 100 workers)\n",
		backend, n, 100*rssSlope, 100*heapSlope, 100*cpuSlope, 100*rssSlope/float64(n))
}

// fit is a least-squares line y = slope*x + base.
func fit(rows []fleetRow, xOf, y func(fleetRow) float64) (slope, base float64) {
	var sx, sy, sxx, sxy float64
	for _, r := range rows {
		x := xOf(r)
		sx, sy, sxx, sxy = sx+x, sy+y(r), sxx+x*x, sxy+x*y(r)
	}
	n := float64(len(rows))
	if d := n*sxx - sx*sx; d != 0 {
		slope = (n*sxy - sx*sy) / d
	}
	return slope, (sy - slope*sx) / n
}

// fleetCluster is one workload cluster of the fleet: exactly one of k3s and kubeadm is set.
type fleetCluster struct {
	k3s     *workload.K3s
	kubeadm *workload.Kubeadm
}

func (c fleetCluster) apiServer() *env.APIServer {
	if c.k3s != nil {
		return c.k3s.APIServer
	}
	return c.kubeadm.APIServer
}

// fail stops the etcd member on Node node. K3s's leader then finds it unhealthy at its next
// tick and says so on the Node (EtcdIsVoter False Unhealthy); kubeadm's member connections end.
//
// Note: a Node going NotReady is not a member failing. K3s keeps reporting a member whose
// kubelet stopped as healthy, and etcd-adapter believes the report K3s writes after the Node
// went NotReady (pkg/k3s readySince). So a NotReady Node shows as Unknown only until K3s's next
// report, at most its condition heartbeat later: a measure made that way missed whole workload
// clusters whose passes came after that report.
func (c fleetCluster) fail(ctx context.Context, node string) error {
	if c.k3s != nil {
		return c.k3s.Etcd.MemberOnNode(node).Stop()
	}
	return c.kubeadm.Etcd.MemberOnNode(node).Stop()
}

func (c fleetCluster) recover(ctx context.Context, node string) error {
	if c.k3s != nil {
		return c.k3s.Etcd.MemberOnNode(node).Restart(ctx)
	}
	return c.kubeadm.Etcd.MemberOnNode(node).Restart(ctx)
}

func (c fleetCluster) close() error {
	if c.k3s != nil {
		return c.k3s.Close()
	}
	return c.kubeadm.Close()
}

// fleet is the Clusters of one backend registered so far, on their workload clusters.
type fleet struct {
	ns      string
	backend v1alpha1.Backend
	// share is how many Clusters each workload cluster serves (FLEET_SHARE, default 1).
	share int
	// workloads are the workload clusters started so far; Cluster i is on workloads[i/share].
	workloads []fleetCluster
	// n is the number of Clusters registered so far.
	n       int
	workers int
}

func (f *fleet) start(ctx context.Context, idx int) (fleetCluster, error) {
	if f.backend == v1alpha1.BackendKubeadm {
		k, err := workload.StartKubeadm(ctx, workload.KubeadmOptions{Members: 3, Heartbeat: 10 * time.Second})
		return fleetCluster{kubeadm: k}, err
	}
	// K3s ticks every 2 s and kubelets report every 10 s; slower than the tests' defaults, so 20
	// clusters leave the shared machine some CPU.
	k, err := workload.StartK3s(ctx, workload.K3sOptions{
		Members: 3, FirstIP: 10 + 3*idx, Tick: 2 * time.Second, Heartbeat: 10 * time.Second,
	})
	return fleetCluster{k3s: k}, err
}

// grow starts workload clusters and registers Clusters until there are n, a few at a time.
func (f *fleet) grow(ctx context.Context, n int) error {
	if err := f.startWorkloads(ctx, (n+f.share-1)/f.share); err != nil {
		return err
	}
	if err := f.registerUpTo(ctx, n); err != nil {
		return err
	}
	if err := f.waitObserved(ctx, healthy); err != nil {
		return fmt.Errorf("failed waiting for %d ControlPlaneEtcds to report 3 healthy members: %w", f.n, err)
	}
	return nil
}

// startWorkloads starts workload clusters until there are want.
func (f *fleet) startWorkloads(ctx context.Context, want int) error {
	const parallel = 2
	for len(f.workloads) < want {
		batch := min(parallel, want-len(f.workloads))
		started := make([]fleetCluster, batch)
		errs := make([]error, batch)
		var wg sync.WaitGroup
		for i := range batch {
			idx := len(f.workloads) + i
			wg.Go(func() {
				// A cluster that was not ready within the workload package's minute on a
				// saturated machine is started once more.
				for attempt := 0; attempt < 2; attempt++ {
					started[i], errs[i] = f.start(ctx, idx)
					if errs[i] == nil {
						break
					}
				}
			})
		}
		wg.Wait()
		for i, c := range started {
			if errs[i] != nil {
				return fmt.Errorf("failed to start %s workload cluster %d: %w", f.backend, len(f.workloads), errs[i])
			}
			f.workloads = append(f.workloads, c)
		}
	}
	return nil
}

// registerUpTo registers Clusters until there are n, several at a time.
func (f *fleet) registerUpTo(ctx context.Context, n int) error {
	sem := make(chan struct{}, 8)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := f.n; i < n; i++ {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = f.register(ctx, i)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	f.n = n
	return nil
}

func healthy(cpe *v1alpha1.ControlPlaneEtcd) bool {
	return cpe.Status.HealthyVoters != nil && *cpe.Status.HealthyVoters == 3
}

func (f *fleet) name(i int) string { return fmt.Sprintf("%s-%02d", f.backend, i) }

// index is the number of the Cluster named name (see name), or f.n for a name not of the fleet.
func (f *fleet) index(name string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(name, string(f.backend)+"-"))
	if err != nil || i < 0 {
		return f.n
	}
	return i
}

// register creates Cluster i, its Secrets and its ControlPlaneEtcd. Clusters that share a
// workload cluster each connect with a user of their own: with the same credentials client-go
// would share one transport between them, and the manager would hold fewer connections than for
// as many real clusters.
func (f *fleet) register(ctx context.Context, i int) error {
	name := f.name(i)
	w := f.workloads[i/f.share]
	cfg := w.apiServer().Config
	if f.share > 1 {
		var err error
		if cfg, err = w.apiServer().AddAdmin(name); err != nil {
			return err
		}
	}
	in := env.ClusterInput{Namespace: f.ns, Name: name, Workload: cfg}
	if k := w.kubeadm; k != nil {
		in.EtcdCACert, in.EtcdCAKey = k.Etcd.CA().CertPEM(), k.Etcd.CA().KeyPEM()
	}
	if _, err := env.RegisterCluster(ctx, mgmt.Client, in); err != nil {
		return err
	}
	return mgmt.Client.Create(ctx, &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: name, Backend: f.backend, Mode: v1alpha1.ModeObserve},
	})
}

// addWorkers creates worker Nodes in every cluster until each has n: Node objects with what a
// kubelet writes (labels, capacity, images, node info, conditions), and no kubelet behind them.
func (f *fleet) addWorkers(ctx context.Context, n int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(f.workloads))
	sem := make(chan struct{}, 4)
	for i, c := range f.workloads {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			for w := f.workers; w < n && errs[i] == nil; w++ {
				errs[i] = createWorker(ctx, c.apiServer().Client, fmt.Sprintf("worker-%04d", w))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("failed to create worker Nodes: %w", err)
	}
	f.workers = n
	return nil
}

func createWorker(ctx context.Context, c client.Client, name string) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"node.kubernetes.io/instance-type": "m5.xlarge", "topology.kubernetes.io/zone": "zone-a",
	}}}
	if err := c.Create(ctx, n); err != nil {
		return fmt.Errorf("failed to create Node %s: %w", name, err)
	}
	// A merge patch, not an update: the workload cluster's own controllers may have written the
	// Node since it was created.
	before := n.DeepCopy()
	images := make([]corev1.ContainerImage, 0, 10)
	for i := range 10 {
		images = append(images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("registry.example/app-%d@sha256:%064d", i, i), fmt.Sprintf("registry.example/app-%d:v1.%d", i, i)},
			SizeBytes: int64(i+1) << 24,
		})
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	now := metav1.Now()
	n.Status = corev1.NodeStatus{
		Capacity: res, Allocatable: res, Images: images,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.0.1"}, {Type: corev1.NodeHostName, Address: name}},
		NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.34.2", OSImage: "Ubuntu 24.04", ContainerRuntimeVersion: "containerd://2.1.0", Architecture: "amd64", OperatingSystem: "linux"},
		Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: now, LastTransitionTime: now},
		},
	}
	if err := c.Status().Patch(ctx, n, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to write the status of Node %s: %w", name, err)
	}
	return nil
}

// deleteAll deletes every Cluster and ControlPlaneEtcd of the fleet and waits until they are
// gone. The ClusterCache disconnects on a Cluster's deletion and the registry forgets it; the
// caller samples when the HTTP connections to the workload apiservers have closed.
func (f *fleet) deleteAll(ctx context.Context) error {
	for i := range f.n {
		key := client.ObjectKey{Namespace: f.ns, Name: f.name(i)}
		if err := client.IgnoreNotFound(mgmt.Client.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})); err != nil {
			return fmt.Errorf("failed to delete Cluster %s: %w", key, err)
		}
		if err := client.IgnoreNotFound(mgmt.Client.Delete(ctx, &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})); err != nil {
			return fmt.Errorf("failed to delete ControlPlaneEtcd %s: %w", key, err)
		}
		// The test environment runs no garbage collector, which would delete the Cluster's
		// Secrets with it; the manager caches them.
		for _, suffix := range []string{"-kubeconfig", "-etcd"} {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name + suffix}}
			if err := client.IgnoreNotFound(mgmt.Client.Delete(ctx, secret)); err != nil {
				return fmt.Errorf("failed to delete Secret %s: %w", client.ObjectKeyFromObject(secret), err)
			}
		}
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		clusters, cpes := &clusterv1.ClusterList{}, &v1alpha1.ControlPlaneEtcdList{}
		if err := mgmt.Client.List(ctx, clusters, client.InNamespace(f.ns)); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		if err := mgmt.Client.List(ctx, cpes, client.InNamespace(f.ns)); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		return len(clusters.Items) == 0 && len(cpes.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("failed waiting for the fleet's Clusters and ControlPlaneEtcds to be gone: %w", err)
	}
	return nil
}

// waitObserved waits until every cluster's status satisfies ok.
func (f *fleet) waitObserved(ctx context.Context, ok func(*v1alpha1.ControlPlaneEtcd) bool) error {
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &v1alpha1.ControlPlaneEtcdList{}
		if err := mgmt.Client.List(ctx, list, client.InNamespace(f.ns)); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		n := 0
		for i := range list.Items {
			if ok(&list.Items[i]) {
				n++
			}
		}
		return n == f.n, nil
	})
}

// measure samples the manager's CPU over a quiet window, its RSS, heap, descriptors and
// goroutines, then how long each status takes to say that a member failed (all clusters at
// once).
func (f *fleet) measure(ctx context.Context, proc *managerProcess, window time.Duration) (fleetRow, error) {
	row := fleetRow{n: f.n, workers: f.workers}
	// Let the connections of the clusters just added settle before sampling.
	if err := sleep(ctx, settle); err != nil {
		return row, err
	}
	before, err := proc.cpuTicks()
	if err != nil {
		return row, err
	}
	// Profiles are named after the size and the worker Nodes, so a step with workers does not
	// overwrite the one without.
	name := fmt.Sprintf("%s-N%d-W%d", f.backend, f.n, f.workers)
	quiet := profileCPU(proc, name+"-quiet", window-time.Second)
	if err := sleep(ctx, window); err != nil {
		return row, err
	}
	after, err := proc.cpuTicks()
	if err != nil {
		return row, err
	}
	if err := quiet(); err != nil {
		return row, fmt.Errorf("failed to save the manager's CPU profile: %w", err)
	}
	row.cpuPerMin = float64(after-before) / clockTicks / window.Minutes()
	if row.sample, err = proc.sample(); err != nil {
		return row, err
	}
	// What the manager does while every Cluster reports the failure.
	busy := profileCPU(proc, name+"-freshness", 30*time.Second)
	managerBefore, errM := proc.cpuTicks()
	machineBusyBefore, machineTotalBefore, errB := machineCPU()
	started := time.Now()
	lat, err := f.freshness(ctx, len(f.workloads))
	managerAfter, errM2 := proc.cpuTicks()
	machineBusyAfter, machineTotalAfter, errB2 := machineCPU()
	err = errors.Join(err, busy(), errM, errB, errM2, errB2)
	if err == nil {
		row.freshManagerCores = float64(managerAfter-managerBefore) / clockTicks / time.Since(started).Seconds()
		row.freshMachineBusy = float64(machineBusyAfter-machineBusyBefore) / float64(max(1, machineTotalAfter-machineTotalBefore))
	}
	if err != nil {
		// What the manager was doing, for FLEET_PROFILES.
		return row, errors.Join(err, saveHeapProfile(proc, name+"-stuck"), f.saveMetrics(proc))
	}
	row.freshP50, row.freshMax = median(lat), slices.Max(lat)
	// The same failure on the first workload cluster alone, the fleet's other passes going on.
	if lat, err = f.freshness(ctx, 1); err != nil {
		return row, errors.Join(err, saveHeapProfile(proc, name+"-stuck-one"), f.saveMetrics(proc))
	}
	row.oneP50, row.oneMax = median(lat), slices.Max(lat)
	return row, nil
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

// freshness makes the member on Node cp-2 fail on the first `workloads` workload clusters at
// once and measures, for each of their Clusters, the time until its status no longer calls that
// member healthy; then brings the members back and waits for the whole fleet to be healthy.
func (f *fleet) freshness(ctx context.Context, workloads int) ([]time.Duration, error) {
	const node = "cp-2"
	failing := f.workloads[:workloads]
	want := min(f.n, workloads*f.share)
	var start time.Time
	trigger := func() error {
		start = time.Now()
		for _, c := range failing {
			if err := c.fail(ctx, node); err != nil {
				return fmt.Errorf("failed to make the member on Node %s fail: %w", node, err)
			}
		}
		return nil
	}
	seen, err := f.watchUntil(ctx, trigger, &start, want, func(cpe *v1alpha1.ControlPlaneEtcd) bool {
		return f.index(cpe.Name) < want && slices.ContainsFunc(cpe.Status.Members, func(m v1alpha1.EtcdMemberStatus) bool {
			return m.NodeName == node && m.Health != v1alpha1.MemberHealthy
		})
	})
	if err != nil {
		return nil, fmt.Errorf("failed waiting for %d statuses to report Node %s (%d did; not: %s; workload clusters of those not reporting: %s): %w",
			want, node, len(seen), f.describeMissing(ctx, seen, want), f.describeWorkloadsMissing(ctx, seen, want, node), err)
	}
	for _, c := range failing {
		if err := c.recover(ctx, node); err != nil {
			return nil, fmt.Errorf("failed to bring the member on Node %s back: %w", node, err)
		}
	}
	if err := f.waitObserved(ctx, healthy); err != nil {
		return nil, fmt.Errorf("failed waiting for the fleet to be healthy again: %w", err)
	}
	out := make([]time.Duration, 0, len(seen))
	for _, d := range seen {
		out = append(out, d)
	}
	return out, nil
}

// saveMetrics writes the manager's /metrics into FLEET_PROFILES (when set).
func (f *fleet) saveMetrics(proc *managerProcess) error {
	dir := os.Getenv("FLEET_PROFILES")
	if dir == "" {
		return nil
	}
	text, err := body("http://" + proc.diagnostics + "/metrics")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("metrics-%s-N%d.txt", f.backend, f.n)), []byte(text), 0o600)
}

// describeMissing names the ControlPlaneEtcds not in seen, with their health condition, for the
// error of a freshness measure that timed out.
func (f *fleet) describeMissing(ctx context.Context, seen map[string]time.Duration, want int) string {
	list := &v1alpha1.ControlPlaneEtcdList{}
	if err := mgmt.Client.List(ctx, list, client.InNamespace(f.ns)); err != nil {
		return err.Error()
	}
	var out []string
	for i := range list.Items {
		cpe := &list.Items[i]
		if _, ok := seen[cpe.Name]; ok || f.index(cpe.Name) >= want || len(out) >= 10 {
			continue
		}
		why := "no condition"
		if c := meta.FindStatusCondition(cpe.Status.Conditions, v1alpha1.EtcdClusterHealthyCondition); c != nil {
			why = fmt.Sprintf("%s %s %q at %s", c.Status, c.Reason, c.Message, c.LastTransitionTime.UTC().Format(time.TimeOnly))
		}
		out = append(out, fmt.Sprintf("%s (%d members; %s)", cpe.Name, len(cpe.Status.Members), why))
	}
	return strings.Join(out, ", ")
}

// describeWorkloadsMissing says, for each workload cluster with a ControlPlaneEtcd not in seen,
// how many of its Clusters did not report and what its own apiserver says of Node node: whether
// the failure is there to see (the manager did not see it) or is not (the workload cluster lost
// it).
func (f *fleet) describeWorkloadsMissing(ctx context.Context, seen map[string]time.Duration, want int, node string) string {
	missing := map[int]int{}
	for i := range want {
		if _, ok := seen[f.name(i)]; !ok {
			missing[i/f.share]++
		}
	}
	var out []string
	for w, n := range missing {
		what := "its member is stopped"
		if f.backend != v1alpha1.BackendKubeadm {
			what = "Node not read"
			got := &corev1.Node{}
			if err := f.workloads[w].apiServer().Client.Get(ctx, client.ObjectKey{Name: node}, got); err != nil {
				what = err.Error()
			}
			var conds []string
			for _, c := range got.Status.Conditions {
				if c.Type == corev1.NodeReady || c.Type == k3s.EtcdIsVoterCondition {
					conds = append(conds, fmt.Sprintf("%s=%s %s since %s, heartbeat %s", c.Type, c.Status, c.Reason,
						c.LastTransitionTime.UTC().Format(time.TimeOnly), c.LastHeartbeatTime.UTC().Format(time.TimeOnly)))
				}
			}
			if len(conds) > 0 {
				what = fmt.Sprintf("Node %s: %s", node, strings.Join(conds, ", "))
			}
		}
		out = append(out, fmt.Sprintf("workload %d: %d Clusters (%s)", w, n, what))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// watchUntil watches the fleet's ControlPlaneEtcds, calls trigger once the watch is open, and
// records for each the time from *start to the first event that satisfies done. Events arrive
// as the API server commits them, so the figure does not depend on how fast a List answers on a
// loaded machine.
func (f *fleet) watchUntil(ctx context.Context, trigger func() error, start *time.Time, want int, done func(*v1alpha1.ControlPlaneEtcd) bool) (map[string]time.Duration, error) {
	wc, err := client.NewWithWatch(mgmt.Config, client.Options{Scheme: mgmt.Client.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("failed to create a watching client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	w, err := wc.Watch(ctx, &v1alpha1.ControlPlaneEtcdList{}, client.InNamespace(f.ns))
	if err != nil {
		return nil, fmt.Errorf("failed to watch ControlPlaneEtcds: %w", err)
	}
	defer func() { w.Stop() }()
	if err := trigger(); err != nil {
		return nil, err
	}
	seen := map[string]time.Duration{}
	see := func(cpe *v1alpha1.ControlPlaneEtcd) {
		if _, ok := seen[cpe.Name]; !ok && done(cpe) {
			seen[cpe.Name] = time.Since(*start)
		}
	}
	lastRV := ""
	for len(seen) < want {
		select {
		case <-ctx.Done():
			return seen, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The apiserver ends a watch that falls behind (thousands of status writes at
				// once); go on from the last event seen, or from a list when that is too old.
				if w, lastRV, err = f.rewatch(ctx, wc, lastRV, see); err != nil {
					return seen, err
				}
				continue
			}
			cpe, isCPE := ev.Object.(*v1alpha1.ControlPlaneEtcd)
			if !isCPE {
				continue
			}
			lastRV = cpe.ResourceVersion
			see(cpe)
		}
	}
	return seen, nil
}

// rewatch opens the ControlPlaneEtcd watch again from resourceVersion rv; when that fails it lists
// them (each listed one goes to see) and watches from the list.
func (f *fleet) rewatch(ctx context.Context, wc client.WithWatch, rv string, see func(*v1alpha1.ControlPlaneEtcd)) (watch.Interface, string, error) {
	if rv != "" {
		w, err := wc.Watch(ctx, &v1alpha1.ControlPlaneEtcdList{}, client.InNamespace(f.ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err == nil {
			return w, rv, nil
		}
	}
	list := &v1alpha1.ControlPlaneEtcdList{}
	if err := wc.List(ctx, list, client.InNamespace(f.ns)); err != nil {
		return nil, rv, fmt.Errorf("failed to list ControlPlaneEtcds after the watch ended: %w", err)
	}
	for i := range list.Items {
		see(&list.Items[i])
	}
	w, err := wc.Watch(ctx, &v1alpha1.ControlPlaneEtcdList{}, client.InNamespace(f.ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return nil, rv, fmt.Errorf("failed to watch ControlPlaneEtcds again: %w", err)
	}
	return w, list.ResourceVersion, nil
}

// shard labels the fleet's Clusters into two shards, runs one manager per shard
// (--watch-filter=a and =b), and shows they share the fleet without touching each other's
// Clusters: after a status change on every Cluster, each ControlPlaneEtcd was written by its
// shard's manager and never by the other.
func (f *fleet) shard(ctx context.Context, bin, dir string, window time.Duration) error {
	shardOf := func(i int) string { return string(rune('a' + i%2)) }
	for i := range f.n {
		c := &clusterv1.Cluster{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: f.name(i)}, c); err != nil {
			return err
		}
		before := c.DeepCopy()
		c.Labels = map[string]string{clusterv1.WatchLabel: shardOf(i)}
		if err := mgmt.Client.Patch(ctx, c, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("failed to label Cluster %s: %w", c.Name, err)
		}
	}
	procs := map[string]*managerProcess{}
	defer func() {
		for _, p := range procs {
			_ = p.stop()
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
	if err := mgmt.Client.List(ctx, list, client.InNamespace(f.ns)); err != nil {
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

func (f *fleet) close() error {
	var errs []error
	for _, c := range f.workloads {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}

// managerProcess is the etcd-adapter binary running against the management cluster.
type managerProcess struct {
	cmd  *exec.Cmd
	done chan error
	// diagnostics is the address of the manager's /metrics; profiler its pprof.
	diagnostics, profiler string
}

// buildManager builds cmd/etcd-adapter and writes the management cluster's kubeconfig into dir.
func buildManager(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "etcd-adapter")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failed to build the manager: %w: %s", err, out)
	}
	cfg := mgmt.Config
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"m": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"a": {ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}},
		Contexts:       map[string]*clientcmdapi.Context{"c": {Cluster: "m", AuthInfo: "a"}},
		CurrentContext: "c",
	}
	if err := clientcmd.WriteToFile(kc, filepath.Join(dir, "kubeconfig")); err != nil {
		return "", fmt.Errorf("failed to write the kubeconfig: %w", err)
	}
	return bin, nil
}

// startManagerProcess starts the manager binary with the management cluster's kubeconfig,
// webhooks off, and the given --watch-filter ("all": none), and waits until it is ready.
func startManagerProcess(ctx context.Context, bin, dir, shard string, extraArgs ...string) (*managerProcess, error) {
	kubeconfig := filepath.Join(dir, "kubeconfig")
	health, err := freeAddrErr()
	if err != nil {
		return nil, err
	}
	diag, err := freeAddrErr()
	if err != nil {
		return nil, err
	}
	profiler, err := freeAddrErr()
	if err != nil {
		return nil, err
	}
	// The manager's log outlives the benchmark's temporary directory in FLEET_PROFILES.
	logDir := dir
	if d := os.Getenv("FLEET_PROFILES"); d != "" {
		logDir = d
	}
	log, err := os.Create(filepath.Join(logDir, "manager-"+shard+"-"+strconv.FormatInt(time.Now().Unix(), 10)+".log"))
	if err != nil {
		return nil, fmt.Errorf("failed to create the manager log: %w", err)
	}
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--enable-webhooks=false", "--health-addr="+health,
		"--insecure-diagnostics", "--diagnostics-address="+diag, "--profiler-address="+profiler, "-v=1")
	if shard != "all" {
		cmd.Args = append(cmd.Args, "--watch-filter="+shard)
	}
	cmd.Args = append(cmd.Args, extraArgs...)
	// FLEET_MANAGER_ARGS adds flags (-v=4 to see every pass).
	cmd.Args = append(cmd.Args, strings.Fields(os.Getenv("FLEET_MANAGER_ARGS"))...)
	cmd.Stdout, cmd.Stderr = log, log
	// FLEET_MANAGER_ENV sets variables for the manager alone (GOMEMLIMIT, GODEBUG), not for the
	// apiservers and etcd members, which are Go programs too.
	cmd.Env = append(os.Environ(), strings.Fields(os.Getenv("FLEET_MANAGER_ENV"))...)
	// The manager ends with the benchmark process, also when a time limit kills it.
	parentdeath.Set(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start the manager: %w", err)
	}
	p := &managerProcess{cmd: cmd, done: make(chan error, 1), diagnostics: diag, profiler: profiler}
	go func() { p.done <- cmd.Wait() }()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		code, err := statusOf("http://" + health + "/readyz")
		return err == nil && code == 200, nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("the manager did not become ready (log in %s): %w", log.Name(), err), p.stop())
	}
	return p, nil
}

// cpuTicks is the process's user plus system CPU time in clock ticks.
func (p *managerProcess) cpuTicks() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("failed to read the manager's CPU time: %w", err)
	}
	// Fields after the command name (which may hold spaces) start after the last ')'.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("failed to parse /proc/%d/stat: %w", p.cmd.Process.Pid, err)
	}
	return utime + stime, nil
}

// rssMiB is the process's resident memory.
func (p *managerProcess) rssMiB() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("failed to read the manager's memory: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("failed to parse VmRSS %q: %w", rest, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", p.cmd.Process.Pid)
}

// sample reads the process's resident memory and open file descriptors from /proc, and its Go
// heap in use and goroutines from its /metrics.
func (p *managerProcess) sample() (sample, error) {
	var s sample
	var err error
	if s.rssMiB, err = p.rssMiB(); err != nil {
		return s, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	if err != nil {
		return s, fmt.Errorf("failed to list the manager's file descriptors: %w", err)
	}
	s.fds = len(fds)
	// The heap profile with gc=1 runs a garbage collection first, so the heap in use read next
	// is what the manager keeps, not what the collector has yet to free.
	if _, err := body("http://" + p.profiler + "/debug/pprof/heap?gc=1"); err != nil {
		return s, fmt.Errorf("failed to collect the manager's garbage: %w", err)
	}
	text, err := body("http://" + p.diagnostics + "/metrics")
	if err != nil {
		return s, fmt.Errorf("failed to read the manager's metrics: %w", err)
	}
	heap, err := metricValue(text, "go_memstats_heap_inuse_bytes")
	if err != nil {
		return s, err
	}
	goroutines, err := metricValue(text, "go_goroutines")
	if err != nil {
		return s, err
	}
	live, err := metricValue(text, "go_memstats_heap_alloc_bytes")
	if err != nil {
		return s, err
	}
	s.heapMiB, s.liveMiB, s.goroutines = heap/(1<<20), live/(1<<20), int(goroutines)
	return s, nil
}

// goroutineGroups counts the manager's goroutines by stack (pprof's goroutine profile,
// debug=1), each stack named by its function frames.
func (p *managerProcess) goroutineGroups() (map[string]int, error) {
	text, err := body("http://" + p.profiler + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return nil, fmt.Errorf("failed to read the manager's goroutine profile: %w", err)
	}
	groups := map[string]int{}
	for _, g := range strings.Split(text, "\n\n") {
		lines := strings.Split(strings.TrimSpace(g), "\n")
		count, _, ok := strings.Cut(lines[0], " @ ")
		n, err := strconv.Atoi(count)
		if !ok || err != nil {
			continue
		}
		var frames []string
		for _, l := range lines[1:] {
			// "#\t0x46b2e1\tpkg.Func+0x21\tfile.go:12"
			fields := strings.Split(l, "\t")
			if len(fields) >= 3 {
				name, _, _ := strings.Cut(fields[2], "+0x")
				frames = append(frames, name)
			}
		}
		groups[strings.Join(frames, " < ")] += n
	}
	return groups, nil
}

// printGoroutineGrowth prints the stacks that have more goroutines than at the baseline.
func printGoroutineGrowth(backend v1alpha1.Backend, base, now map[string]int) {
	for stack, n := range now {
		if n > base[stack] {
			fmt.Printf("fleet %s goroutines left: +%d %s\n", backend, n-base[stack], stack)
		}
	}
}

// metricValue is the value of an unlabelled metric in Prometheus text format.
func metricValue(text, name string) (float64, error) {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				return 0, fmt.Errorf("failed to parse %s %q: %w", name, rest, err)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("no %s in the manager's metrics", name)
}

// stop sends SIGTERM and waits for the graceful shutdown.
func (p *managerProcess) stop() error {
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		return fmt.Errorf("failed to stop the manager: %w", err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("the manager exited with an error: %w", err)
		}
		return nil
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		return errors.New("the manager did not stop within a minute of SIGTERM")
	}
}

func freeAddrErr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("failed to find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}
