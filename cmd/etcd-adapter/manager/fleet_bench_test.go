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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/parentdeath"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

const (
	// clockTicks is the kernel's USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
	clockTicks = 100
	// settle is the pause between growing the fleet and sampling the manager's CPU.
	settle = 10 * time.Second
)

// BenchmarkFleet runs the etcd-adapter manager binary (a separate process, so its CPU and memory
// are its own) against N K3s-flavoured workload clusters, each with its own apiserver, 3-member
// etcd and K3s simulator, for N = 1, 5, 10, 20 (FLEET_SIZES overrides, e.g. "1,5"), growing the
// fleet between sizes. Per size it prints the manager's CPU-seconds per minute over a quiet
// window (FLEET_WINDOW, default 1m), its resident memory, and status freshness: the time from a
// Node going NotReady on every cluster at once to each ControlPlaneEtcd saying so. From the
// slope it estimates 1,000 clusters on one manager.
func BenchmarkFleet(b *testing.B) {
	sizes := fleetSizes(b)
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
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	for range b.N {
		f := &fleet{ns: "fleet-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
		if err := mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}); err != nil {
			b.Fatal(err)
		}
		dir := b.TempDir()
		bin, err := buildManager(ctx, dir)
		if err != nil {
			b.Fatal(err)
		}
		proc, err := startManagerProcess(ctx, bin, dir, "all")
		if err != nil {
			b.Fatal(err)
		}
		var rows []fleetRow
		for _, n := range sizes {
			if err := f.grow(ctx, n); err != nil {
				b.Fatal(errors.Join(err, f.close(), proc.stop()))
			}
			row, err := f.measure(ctx, proc, window)
			if err != nil {
				b.Fatal(errors.Join(err, f.close(), proc.stop()))
			}
			rows = append(rows, row)
			fmt.Printf("fleet N=%-3d manager CPU %6.2f s/min (%.3f per cluster)  RSS %6.1f MiB  status freshness p50 %v max %v\n",
				n, row.cpuPerMin, row.cpuPerMin/float64(n), row.rssMiB, row.freshP50.Round(time.Millisecond), row.freshMax.Round(time.Millisecond))
		}
		printEstimate(rows)
		if err := proc.stop(); err != nil {
			b.Fatal(errors.Join(err, f.close()))
		}
		if err := f.shard(ctx, bin, dir, window); err != nil {
			b.Fatal(errors.Join(err, f.close()))
		}
		if err := f.close(); err != nil {
			b.Fatal(err)
		}
	}
}

func fleetSizes(b *testing.B) []int {
	s := os.Getenv("FLEET_SIZES")
	if s == "" {
		return []int{1, 5, 10, 20}
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("FLEET_SIZES: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

type fleetRow struct {
	n                  int
	cpuPerMin, rssMiB  float64
	freshP50, freshMax time.Duration
}

// printEstimate fits CPU and memory to a line over the sizes and extrapolates to 1,000 clusters.
func printEstimate(rows []fleetRow) {
	if len(rows) < 2 {
		return
	}
	cpuSlope, cpuBase := fit(rows, func(r fleetRow) float64 { return r.cpuPerMin })
	rssSlope, rssBase := fit(rows, func(r fleetRow) float64 { return r.rssMiB })
	fmt.Printf("fleet slope: %.3f CPU-s/min and %.2f MiB per cluster (base %.2f CPU-s/min, %.1f MiB); 1,000 clusters on one manager ≈ %.1f CPU-s/min (%.2f cores) and %.0f MiB\n",
		cpuSlope, rssSlope, cpuBase, rssBase, cpuBase+1000*cpuSlope, (cpuBase+1000*cpuSlope)/60, rssBase+1000*rssSlope)
}

// fit is a least-squares line y = slope*n + base.
func fit(rows []fleetRow, y func(fleetRow) float64) (slope, base float64) {
	var sx, sy, sxx, sxy float64
	for _, r := range rows {
		x := float64(r.n)
		sx, sy, sxx, sxy = sx+x, sy+y(r), sxx+x*x, sxy+x*y(r)
	}
	n := float64(len(rows))
	slope = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return slope, (sy - slope*sx) / n
}

// fleet is the workload clusters registered so far.
type fleet struct {
	ns       string
	clusters []*workload.K3s
}

// grow starts and registers clusters until there are n, a few at a time.
func (f *fleet) grow(ctx context.Context, n int) error {
	const parallel = 2
	for len(f.clusters) < n {
		batch := min(parallel, n-len(f.clusters))
		started := make([]*workload.K3s, batch)
		errs := make([]error, batch)
		var wg sync.WaitGroup
		for i := range batch {
			idx := len(f.clusters) + i
			wg.Go(func() {
				// K3s ticks every 15 s and kubelets report every 10 s; slower than the tests'
				// defaults, so 20 clusters leave the shared machine some CPU.
				// A cluster that was not ready within the workload package's minute on a
				// saturated machine is started once more.
				for attempt := 0; attempt < 2; attempt++ {
					started[i], errs[i] = workload.StartK3s(ctx, workload.K3sOptions{
						Members: 3, FirstIP: 10 + 3*idx, Tick: 2 * time.Second, Heartbeat: 10 * time.Second,
					})
					if errs[i] == nil {
						break
					}
				}
			})
		}
		wg.Wait()
		for i, k := range started {
			if k != nil {
				f.clusters = append(f.clusters, k)
			}
			if errs[i] != nil {
				return fmt.Errorf("failed to start K3s workload cluster %d: %w", len(f.clusters), errs[i])
			}
		}
		for idx := len(f.clusters) - batch; idx < len(f.clusters); idx++ {
			if err := f.register(ctx, idx); err != nil {
				return err
			}
		}
	}
	if err := f.waitObserved(ctx, healthy); err != nil {
		return fmt.Errorf("failed waiting for %d ControlPlaneEtcds to report 3 healthy members: %w", len(f.clusters), err)
	}
	return nil
}

func healthy(cpe *v1alpha1.ControlPlaneEtcd) bool {
	return cpe.Status.HealthyVoters != nil && *cpe.Status.HealthyVoters == 3
}

func (f *fleet) name(i int) string { return fmt.Sprintf("k3s-%02d", i) }

func (f *fleet) register(ctx context.Context, i int) error {
	name := f.name(i)
	if _, err := env.RegisterCluster(ctx, mgmt.Client, env.ClusterInput{Namespace: f.ns, Name: name, Workload: f.clusters[i].APIServer.Config}); err != nil {
		return err
	}
	return mgmt.Client.Create(ctx, &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: name, Backend: v1alpha1.BackendK3s, Mode: v1alpha1.ModeObserve},
	})
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
		return n == len(f.clusters), nil
	})
}

// measure samples the manager's CPU over a quiet window, its RSS, then how long each status takes
// to say that a Node went NotReady (all clusters at once).
func (f *fleet) measure(ctx context.Context, proc *managerProcess, window time.Duration) (fleetRow, error) {
	row := fleetRow{n: len(f.clusters)}
	// Let the connections of the clusters just added settle before sampling.
	select {
	case <-ctx.Done():
		return row, ctx.Err()
	case <-time.After(settle):
	}
	before, err := proc.cpuTicks()
	if err != nil {
		return row, err
	}
	select {
	case <-ctx.Done():
		return row, ctx.Err()
	case <-time.After(window):
	}
	after, err := proc.cpuTicks()
	if err != nil {
		return row, err
	}
	row.cpuPerMin = float64(after-before) / clockTicks / window.Minutes()
	if row.rssMiB, err = proc.rssMiB(); err != nil {
		return row, err
	}
	lat, err := f.freshness(ctx)
	if err != nil {
		return row, err
	}
	slices.Sort(lat)
	row.freshP50, row.freshMax = lat[len(lat)/2], lat[len(lat)-1]
	return row, nil
}

// freshness makes Node cp-2 NotReady on every cluster at once and measures, per cluster, the time
// until its status no longer calls that member healthy; then makes the Nodes Ready again.
func (f *fleet) freshness(ctx context.Context) ([]time.Duration, error) {
	const node = "cp-2"
	var start time.Time
	trigger := func() error {
		start = time.Now()
		for _, k := range f.clusters {
			if err := k.Kubelet(node).SetNotReady(ctx, corev1.ConditionFalse, "FleetBenchmark"); err != nil {
				return fmt.Errorf("failed to make Node %s NotReady: %w", node, err)
			}
		}
		return nil
	}
	seen, err := f.watchUntil(ctx, trigger, &start, func(cpe *v1alpha1.ControlPlaneEtcd) bool {
		return slices.ContainsFunc(cpe.Status.Members, func(m v1alpha1.EtcdMemberStatus) bool {
			return m.NodeName == node && m.Health != v1alpha1.MemberHealthy
		})
	})
	if err != nil {
		return nil, fmt.Errorf("failed waiting for %d statuses to report Node %s (%d did): %w", len(f.clusters), node, len(seen), err)
	}
	for _, k := range f.clusters {
		if err := k.Kubelet(node).SetReady(ctx); err != nil {
			return nil, fmt.Errorf("failed to make Node %s Ready: %w", node, err)
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

// watchUntil watches the fleet's ControlPlaneEtcds, calls trigger once the watch is open, and
// records for each the time from *start to the first event that satisfies done. Events arrive
// as the API server commits them, so the figure does not depend on how fast a List answers on a
// loaded machine.
func (f *fleet) watchUntil(ctx context.Context, trigger func() error, start *time.Time, done func(*v1alpha1.ControlPlaneEtcd) bool) (map[string]time.Duration, error) {
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
	defer w.Stop()
	if err := trigger(); err != nil {
		return nil, err
	}
	seen := map[string]time.Duration{}
	for len(seen) < len(f.clusters) {
		select {
		case <-ctx.Done():
			return seen, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return seen, errors.New("the watch ended")
			}
			cpe, isCPE := ev.Object.(*v1alpha1.ControlPlaneEtcd)
			if !isCPE {
				continue
			}
			if _, ok := seen[cpe.Name]; !ok && done(cpe) {
				seen[cpe.Name] = time.Since(*start)
			}
		}
	}
	return seen, nil
}

// shard labels the fleet's Clusters into two shards, runs one manager per shard
// (--watch-filter=a and =b), and shows they share the fleet without touching each other's
// Clusters: after a status change on every Cluster, each ControlPlaneEtcd was written by its
// shard's manager and never by the other.
func (f *fleet) shard(ctx context.Context, bin, dir string, window time.Duration) error {
	shardOf := func(i int) string { return string(rune('a' + i%2)) }
	for i := range f.clusters {
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
	if _, err := f.freshness(ctx); err != nil {
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
		idx, _ := strconv.Atoi(strings.TrimPrefix(cpe.Name, "k3s-"))
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
			shard, shard, wrote["etcd-adapter-"+shard], len(f.clusters), float64(after-cpus[shard])/clockTicks/window.Minutes(), rss)
	}
	return nil
}

func (f *fleet) close() error {
	var errs []error
	for _, k := range f.clusters {
		errs = append(errs, k.Close())
	}
	return errors.Join(errs...)
}

// managerProcess is the etcd-adapter binary running against the management cluster.
type managerProcess struct {
	cmd  *exec.Cmd
	done chan error
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
	log, err := os.Create(filepath.Join(dir, "manager-"+shard+".log"))
	if err != nil {
		return nil, fmt.Errorf("failed to create the manager log: %w", err)
	}
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--enable-webhooks=false", "--health-addr="+health,
		"--insecure-diagnostics", "--diagnostics-address="+diag, "-v=1")
	if shard != "all" {
		cmd.Args = append(cmd.Args, "--watch-filter="+shard)
	}
	cmd.Args = append(cmd.Args, extraArgs...)
	cmd.Stdout, cmd.Stderr = log, log
	// The manager ends with the benchmark process, also when a time limit kills it.
	parentdeath.Set(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start the manager: %w", err)
	}
	p := &managerProcess{cmd: cmd, done: make(chan error, 1)}
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
