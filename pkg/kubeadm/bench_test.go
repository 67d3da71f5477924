package kubeadm

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	kcpetcd "sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/etcd"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/proxy"

	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm/internal/portforward"
	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
)

// benchRounds is how many times each variant runs per cluster size; the medians are reported.
const benchRounds = 25

// BenchmarkObserve_vsKCP times, in one run, against the same 3- and 5-member clusters through
// the same real apiserver:
//
//	(a) the baseline, KCP v1.14's per-reconcile etcd work with KCP's own exported client: it
//	    asks ONE member (the first reachable Node's) for the member list and the alarms: a new
//	    port-forward and clientv3 client (whose constructor calls Status over a second
//	    port-forward), one MemberList, one AlarmList, close;
//	(b) this backend's full Observe over warm connections: the etcd Pods listed, and EVERY
//	    member asked for Status and a serializable MemberList;
//	(c) the same Observe cold: no connection and no known member (a port-forward and TLS
//	    handshake per member, dialled in parallel); the client certificate stays cached, as it
//	    is for 16 h of its 24 h, and TLS sessions resume.
//
// It prints each median and two ratios per variant: the whole observation against KCP's
// reconcile ((b)/(a), (c)/(a)), and per member asked ((b)/n/(a), (c)/n/(a)), since KCP asks
// one member where this backend asks n.
//
// Wall time on this machine includes the other end of every port-forward: the apiserver, the
// kubelet stand-ins and the etcd members share its cores with the client, where in production
// they run on the workload cluster's Nodes. So it also prints the client's own CPU time per
// variant (clientCPU): what the controller's host pays.
func BenchmarkObserve_vsKCP(b *testing.B) {
	for _, n := range []int{3, 5} {
		b.Run(fmt.Sprintf("%dMembers", n), func(b *testing.B) {
			w := startWorkloadCluster(b, workload, n)
			backend := w.backend(b)
			kcp := newKCPReconcile(b, w)
			ctx := context.Background()
			var kcpT, warmT, coldT []time.Duration
			for range b.N {
				for i := range benchRounds + 2 {
					ka := timeIt(b, func() error { return kcp.run(ctx) })
					ca := timeIt(b, func() error { backend.forgetAll(); _, err := backend.Observe(ctx); return err })
					wa := timeIt(b, func() error { _, err := backend.Observe(ctx); return err })
					if i >= 2 { // the first rounds warm up the apiserver and the kubelets
						kcpT, warmT, coldT = append(kcpT, ka), append(warmT, wa), append(coldT, ca)
					}
				}
			}
			cpu := measureClientCPU(b, ctx, kcp, backend)
			a, bw, c := median(kcpT), median(warmT), median(coldT)
			warm, cold := float64(bw)/float64(a), float64(c)/float64(a)
			b.ReportMetric(ms(a), "kcp-ms")
			b.ReportMetric(ms(bw), "warm-ms")
			b.ReportMetric(ms(c), "cold-ms")
			b.ReportMetric(warm, "warm/kcp")
			b.ReportMetric(cold, "cold/kcp")
			b.ReportMetric(warm/float64(n), "warm/kcp/member")
			b.ReportMetric(cold/float64(n), "cold/kcp/member")
			fmt.Printf("etcd observation, %d members, median of %d: baseline (a) KCP v1.14 per reconcile %v (1 member asked for member list + alarms); "+
				"kubeadm backend (b) warm %v, (c) cold %v (all %d members asked)\n"+
				"  whole observation: (b)/(a) = %.3f, (c)/(a) = %.3f; per member asked: (b)/%d/(a) = %.3f, (c)/%d/(a) = %.3f\n",
				n, len(kcpT), a.Round(10*time.Microsecond), bw.Round(10*time.Microsecond), c.Round(10*time.Microsecond), n,
				warm, cold, n, warm/float64(n), n, cold/float64(n))
			if cpu != nil {
				b.ReportMetric(float64(cpu.cold)/float64(cpu.kcp), "cold-cpu/kcp")
				b.ReportMetric(float64(cpu.warm)/float64(cpu.kcp), "warm-cpu/kcp")
				fmt.Printf("  client CPU per observation (mean of %d): (a) %v, (b) %v, (c) %v; (b)/(a) = %.3f, (c)/(a) = %.3f\n",
					cpuRounds, cpu.kcp.Round(10*time.Microsecond), cpu.warm.Round(10*time.Microsecond), cpu.cold.Round(10*time.Microsecond),
					float64(cpu.warm)/float64(cpu.kcp), float64(cpu.cold)/float64(cpu.kcp))
				if cpu.kcpAPI > 0 {
					fmt.Printf("  workload apiserver CPU per observation (mean of %d, 10 ms ticks): (a) %v, (b) %v, (c) %v; (c)/(a) = %.3f\n",
						cpuRounds, cpu.kcpAPI.Round(10*time.Microsecond), cpu.warmAPI.Round(10*time.Microsecond), cpu.coldAPI.Round(10*time.Microsecond),
						float64(cpu.coldAPI)/float64(cpu.kcpAPI))
				}
			}
		})
	}
}

// kcpReconcile is KCP v1.14's per-reconcile etcd access, with its exported client.
type kcpReconcile struct {
	restConfig *rest.Config
	tlsConfig  *tls.Config
	node       string
}

// newKCPReconcile builds KCP v1.14's TLS config once (KCP caches it): a client certificate of
// the cluster's CA, and a server check of the chain only (InsecureSkipVerify plus a
// VerifyConnection chain check), because KCP dials etcd-<node>, a name no SAN carries.
func newKCPReconcile(b *testing.B, w *workloadCluster) *kcpReconcile {
	b.Helper()
	restCfg, err := mgmt.ClusterCache.GetRESTConfig(context.Background(), w.key)
	if err != nil {
		b.Fatal(err)
	}
	kp, err := w.etcd.CA().NewClientCert(pki.KCPClientCommonName)
	if err != nil {
		b.Fatal(err)
	}
	cert, err := kp.TLSCertificate()
	if err != nil {
		b.Fatal(err)
	}
	roots := w.etcd.CA().CertPool()
	tlsCfg := &tls.Config{
		Certificates:       []tls.Certificate{cert},
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, //nolint:gosec // KCP v1.14's configuration, reproduced for the baseline.
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("etcd server presented no certificates")
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots})
			return err
		},
	}
	return &kcpReconcile{restConfig: restCfg, tlsConfig: tlsCfg, node: w.nodes[0]}
}

// run is what KCP does on every reconcile: forFirstAvailableNode → NewClient (port-forward,
// clientv3, Status), Members, Alarms, Close.
func (k *kcpReconcile) run(ctx context.Context) error {
	c, err := kcpetcd.NewClient(ctx, kcpetcd.ClientConfiguration{
		Endpoint: portforward.PodName(k.node),
		Proxy: proxy.Proxy{
			Kind: "pods", Namespace: metav1.NamespaceSystem, KubeConfig: k.restConfig, Port: portforward.EtcdPort,
		},
		TLSConfig:   k.tlsConfig,
		DialTimeout: DefaultDialTimeout,
		CallTimeout: DefaultCallTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return err
	}
	if _, err := c.Members(ctx); err != nil {
		return errors.Join(err, c.Close())
	}
	_, err = c.Alarms(ctx)
	return errors.Join(err, c.Close())
}

// cpuRounds is how many times each variant runs under the CPU profiler: at the profiler's
// 100 Hz, enough samples for a cold observation of a few milliseconds of CPU.
const cpuRounds = 100

// clientCPUs are the client's CPU time per run of each variant, and the workload apiserver's
// (the port-forwards' first hop) alongside.
type clientCPUs struct{ kcp, warm, cold, kcpAPI, warmAPI, coldAPI time.Duration }

// measureClientCPU runs each variant cpuRounds times, one variant per CPU profile, and returns
// the CPU time per run of the client's goroutines, or nil when a profile is already running
// (go test -cpuprofile).
//
// The client's goroutines are told apart by a pprof label: the goroutines a labelled goroutine
// starts inherit its labels (the port-forward's, TLS's and gRPC's), while the servers' (etcd,
// the kubelet stand-ins) start from their own accept loops without it. Warm observation runs
// over connections dialled earlier, so each variant gets a profile of its own and every
// labelled sample of that profile counts for it.
func measureClientCPU(b *testing.B, ctx context.Context, kcp *kcpReconcile, backend *Backend) *clientCPUs {
	b.Helper()
	var out clientCPUs
	for _, v := range []struct {
		name      string
		into, api *time.Duration
		run       func(context.Context) error
	}{
		{"kcp", &out.kcp, &out.kcpAPI, kcp.run},
		{"cold", &out.cold, &out.coldAPI, func(ctx context.Context) error { backend.forgetAll(); _, err := backend.Observe(ctx); return err }},
		{"warm", &out.warm, &out.warmAPI, func(ctx context.Context) error { _, err := backend.Observe(ctx); return err }},
	} {
		apiBefore, apiErr := workload.ProcessCPU()
		d, ok := clientCPU(b, ctx, v.name, v.run)
		if !ok {
			fmt.Println("  client CPU not measured: a CPU profile is already running (-cpuprofile)")
			return nil
		}
		*v.into = d
		if apiAfter, err := workload.ProcessCPU(); apiErr == nil && err == nil {
			*v.api = (apiAfter - apiBefore) / cpuRounds
		}
	}
	return &out
}

const clientLabel = "etcd-adapter-bench"

// profileDirEnv names a directory where each variant's CPU profile is written
// (<benchmark>-<variant>.pprof), to see where the client's CPU goes:
// go tool pprof -tagfocus etcd-adapter-bench=client <file>.
const profileDirEnv = "ETCD_ADAPTER_BENCH_PROFILES"

// clientCPU runs fn cpuRounds times under a CPU profile and returns the CPU time per run of the
// goroutines that carry clientLabel.
func clientCPU(b *testing.B, ctx context.Context, variant string, fn func(context.Context) error) (time.Duration, bool) {
	b.Helper()
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return 0, false
	}
	var runErr error
	pprof.Do(ctx, pprof.Labels(clientLabel, "client"), func(ctx context.Context) {
		for range cpuRounds {
			if runErr = fn(ctx); runErr != nil {
				return
			}
		}
	})
	pprof.StopCPUProfile()
	if runErr != nil {
		b.Fatal(runErr)
	}
	if dir := os.Getenv(profileDirEnv); dir != "" {
		name := filepath.Join(dir, strings.ReplaceAll(b.Name(), "/", "_")+"-"+variant+".pprof")
		if err := os.WriteFile(name, buf.Bytes(), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		b.Fatal(err)
	}
	cpu := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" })
	if cpu < 0 {
		b.Fatal("the CPU profile has no cpu sample type")
	}
	var total int64
	for _, s := range p.Sample {
		if len(s.Label[clientLabel]) > 0 {
			total += s.Value[cpu]
		}
	}
	return time.Duration(total / cpuRounds), true
}

func timeIt(b *testing.B, fn func() error) time.Duration {
	b.Helper()
	start := time.Now()
	if err := fn(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
