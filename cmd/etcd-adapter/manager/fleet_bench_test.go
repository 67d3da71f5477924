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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
const clockTicks = 100

// BenchmarkFleet runs the etcd-adapter manager binary (a separate process, so its CPU and memory
// are its own) against N K3s-flavoured workload clusters, each with its own apiserver, 3-member
// etcd and K3s simulator, for N = 1, 5, 10, 20 (FLEET_SIZES overrides, e.g. "1,5"), growing the
// fleet between sizes. Per size it prints the manager's CPU-seconds per minute over a quiet
// window (FLEET_WINDOW, default 30s), its resident memory, and status freshness: the time from a
// Node going NotReady on every cluster at once to each ControlPlaneEtcd saying so. From the
// slope it estimates 1,000 clusters on one manager.
func BenchmarkFleet(b *testing.B) {
	sizes := fleetSizes(b)
	window := 30 * time.Second
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
		proc, err := startManagerProcess(ctx, b.TempDir())
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
		if err := errors.Join(f.close(), proc.stop()); err != nil {
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
	const parallel = 4
	for len(f.clusters) < n {
		batch := min(parallel, n-len(f.clusters))
		started := make([]*workload.K3s, batch)
		errs := make([]error, batch)
		var wg sync.WaitGroup
		for i := range batch {
			idx := len(f.clusters) + i
			wg.Go(func() {
				started[i], errs[i] = workload.StartK3s(ctx, workload.K3sOptions{Members: 3, FirstIP: 10 + 3*idx, Tick: time.Second})
			})
		}
		wg.Wait()
		for i, k := range started {
			if k != nil {
				f.clusters = append(f.clusters, k)
			}
			if errs[i] != nil {
				return errs[i]
			}
		}
		for idx := len(f.clusters) - batch; idx < len(f.clusters); idx++ {
			if err := f.register(ctx, idx); err != nil {
				return err
			}
		}
	}
	return f.waitObserved(ctx, func(cpe *v1alpha1.ControlPlaneEtcd) bool {
		return cpe.Status.HealthyVoters != nil && *cpe.Status.HealthyVoters == 3
	})
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
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
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
	start := time.Now()
	for _, k := range f.clusters {
		if err := k.Kubelet(node).SetNotReady(ctx, corev1.ConditionFalse, "FleetBenchmark"); err != nil {
			return nil, fmt.Errorf("failed to make Node %s NotReady: %w", node, err)
		}
	}
	seen := map[string]time.Duration{}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &v1alpha1.ControlPlaneEtcdList{}
		if err := mgmt.Client.List(ctx, list, client.InNamespace(f.ns)); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		for _, cpe := range list.Items {
			if _, ok := seen[cpe.Name]; ok {
				continue
			}
			if slices.ContainsFunc(cpe.Status.Members, func(m v1alpha1.EtcdMemberStatus) bool {
				return m.NodeName == node && m.Health != v1alpha1.MemberHealthy
			}) {
				seen[cpe.Name] = time.Since(start)
			}
		}
		return len(seen) == len(f.clusters), nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed waiting for %d statuses to report Node %s (%d did): %w", len(f.clusters), node, len(seen), err)
	}
	for _, k := range f.clusters {
		if err := k.Kubelet(node).SetReady(ctx); err != nil {
			return nil, fmt.Errorf("failed to make Node %s Ready: %w", node, err)
		}
	}
	if err := f.waitObserved(ctx, func(cpe *v1alpha1.ControlPlaneEtcd) bool {
		return cpe.Status.HealthyVoters != nil && *cpe.Status.HealthyVoters == 3
	}); err != nil {
		return nil, fmt.Errorf("failed waiting for the fleet to be healthy again: %w", err)
	}
	out := make([]time.Duration, 0, len(seen))
	for _, d := range seen {
		out = append(out, d)
	}
	return out, nil
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

// startManagerProcess builds cmd/etcd-adapter and starts it with the management cluster's
// kubeconfig, webhooks off, and waits until it is ready.
func startManagerProcess(ctx context.Context, dir string) (*managerProcess, error) {
	bin := filepath.Join(dir, "etcd-adapter")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("failed to build the manager: %w: %s", err, out)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := mgmt.Config
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"m": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"a": {ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}},
		Contexts:       map[string]*clientcmdapi.Context{"c": {Cluster: "m", AuthInfo: "a"}},
		CurrentContext: "c",
	}
	if err := clientcmd.WriteToFile(kc, kubeconfig); err != nil {
		return nil, fmt.Errorf("failed to write the kubeconfig: %w", err)
	}
	health, err := freeAddrErr()
	if err != nil {
		return nil, err
	}
	diag, err := freeAddrErr()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		return nil, fmt.Errorf("failed to create the manager log: %w", err)
	}
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--enable-webhooks=false", "--health-addr="+health,
		"--insecure-diagnostics", "--diagnostics-address="+diag, "-v=1")
	cmd.Stdout, cmd.Stderr = log, log
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
