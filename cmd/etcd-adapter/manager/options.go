package manager

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/pflag"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/flags"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/setup"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm"
)

// Defaults of Options.
const (
	// DefaultHealthAddr serves /healthz and /readyz (Cluster API providers use :9440).
	DefaultHealthAddr = ":9440"
	// DefaultWebhookPort serves the webhooks (Cluster API providers use 9443).
	DefaultWebhookPort = 9443
	// DefaultWebhookCertDir is where cert-manager's Secret is mounted in the Deployment.
	DefaultWebhookCertDir = "/tmp/k8s-webhook-server/serving-certs/"
	// DefaultSyncPeriod is the manager's resync period (Cluster API's default).
	DefaultSyncPeriod = 10 * time.Minute
	// DefaultLeaderElectionID names the Lease replicas elect a leader with.
	DefaultLeaderElectionID = "etcd-adapter-leader-election"
	// DefaultClusterCacheConcurrency is how many workload cluster connections are set up at once.
	DefaultClusterCacheConcurrency = 100
	// DefaultEtcdCallTimeout bounds one observation of a workload cluster's etcd. It is
	// KubeadmControlPlane's default (--etcd-call-timeout-duration, 15 s, cluster-api
	// controlplane/kubeadm/pkg/etcd/etcd.go DefaultCallTimeout), and longer than
	// kubeadm.DefaultDialTimeout (KubeadmControlPlane's --etcd-dial-timeout-duration, 10 s),
	// because the dial runs inside the observation's deadline: a dial timeout as long as the call
	// timeout would leave nothing for the calls themselves.
	DefaultEtcdCallTimeout = 15 * time.Second
	// DefaultKubeAPIQPS and DefaultKubeAPIBurst limit the manager's requests to the management
	// apiserver. A change on every Cluster at once (a shared failure) writes each status twice
	// (Cluster API's patch helper writes the conditions apart): 2,000 writes for 1,000 Clusters,
	// about 18 s at 100 per second. With client-go's 20/30 (the default of Cluster API's
	// managers), when every pass also read its ControlPlaneEtcd live, such a fleet queued its
	// passes behind the client's rate limiter (make bench-fleet, docs/benchmarks.md). The
	// management apiserver still orders and bounds what it serves with API Priority and Fairness.
	DefaultKubeAPIQPS   = 100
	DefaultKubeAPIBurst = 200
)

// Options are the manager's settings; AddFlags binds them to command-line flags.
type Options struct {
	// LeaderElection and its timings, as Cluster API providers name them.
	LeaderElection              bool
	LeaderElectionID            string
	LeaderElectionNamespace     string
	LeaderElectionLeaseDuration time.Duration
	LeaderElectionRenewDeadline time.Duration
	LeaderElectionRetryPeriod   time.Duration

	// Namespace restricts the manager to one namespace; empty watches all.
	Namespace string
	// WatchFilter, when set, restricts the manager to Clusters labelled
	// cluster.x-k8s.io/watch-filter=<WatchFilter>, so several managers can share a fleet.
	WatchFilter string

	// HealthAddr serves /healthz and /readyz; "0" disables them.
	HealthAddr string
	// ProfilerAddr serves pprof when set.
	ProfilerAddr string
	// Diagnostics are Cluster API's metrics and TLS flags (--diagnostics-address,
	// --insecure-diagnostics, --tls-min-version, ...).
	Diagnostics flags.ManagerOptions

	// Webhooks serves the quorum guard and the Machine hook webhook; off, no certificate is
	// needed (for example `make run` against a management cluster without cert-manager).
	Webhooks       bool
	WebhookPort    int
	WebhookHost    string
	WebhookCertDir string
	WebhookCert    string
	WebhookKey     string
	// ShutdownDelay is how long the manager runs on once asked to stop, its webhook responses
	// closing their connections, before it stops anything (see Run).
	ShutdownDelay time.Duration
	// DiagnosticsCertDir holds the metrics endpoint's serving certificate (tls.crt, tls.key);
	// empty means a self-signed one that no scraper can verify.
	DiagnosticsCertDir string

	// Concurrency is the number of ControlPlaneEtcds reconciled at once.
	Concurrency int
	// ClusterCacheConcurrency is the number of workload cluster connections set up at once.
	ClusterCacheConcurrency int
	// ClusterCacheQPS and ClusterCacheBurst limit the requests to each workload apiserver.
	ClusterCacheQPS   float32
	ClusterCacheBurst int
	// KubeAPIQPS and KubeAPIBurst limit the requests to the management apiserver (see
	// DefaultKubeAPIQPS).
	KubeAPIQPS   float32
	KubeAPIBurst int
	// SyncPeriod is the manager's resync period.
	SyncPeriod time.Duration

	// EtcdCallTimeout bounds one observation of a workload cluster's etcd, dials included.
	EtcdCallTimeout time.Duration
	// EtcdDialTimeout bounds one port-forward plus TLS handshake to a kubeadm etcd member; it
	// must be shorter than EtcdCallTimeout, whose deadline the dial runs under.
	EtcdDialTimeout time.Duration
	// ObservationInterval is how often etcd is observed when nothing else happens, for every
	// ControlPlaneEtcd without spec.observationInterval (the spec wins).
	ObservationInterval time.Duration
	// SnapshotScratchDir is where a snapshot's database is written for its consistency and
	// revision checks before a member removal (spec.snapshot).
	SnapshotScratchDir string
	// EtcdAllowedNetworks are the CIDRs the external etcd backend may dial; empty allows every
	// address. See AllowedNetworks.
	EtcdAllowedNetworks []string

	// SkipNameValidation lets more than one manager run in a process (controller names must be
	// unique per process otherwise). Only used for tests and the demo.
	SkipNameValidation bool
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		LeaderElectionID:            DefaultLeaderElectionID,
		LeaderElectionLeaseDuration: 15 * time.Second,
		LeaderElectionRenewDeadline: 10 * time.Second,
		LeaderElectionRetryPeriod:   2 * time.Second,
		HealthAddr:                  DefaultHealthAddr,
		Diagnostics:                 flags.ManagerOptions{DiagnosticsAddress: ":8443", TLSMinVersion: "VersionTLS12"},
		Webhooks:                    true,
		WebhookPort:                 DefaultWebhookPort,
		WebhookCertDir:              DefaultWebhookCertDir,
		WebhookCert:                 "tls.crt",
		WebhookKey:                  "tls.key",
		Concurrency:                 setup.DefaultConcurrency,
		ClusterCacheConcurrency:     DefaultClusterCacheConcurrency,
		ClusterCacheQPS:             20,
		ClusterCacheBurst:           30,
		KubeAPIQPS:                  DefaultKubeAPIQPS,
		KubeAPIBurst:                DefaultKubeAPIBurst,
		SyncPeriod:                  DefaultSyncPeriod,
		EtcdCallTimeout:             DefaultEtcdCallTimeout,
		EtcdDialTimeout:             kubeadm.DefaultDialTimeout,
		ObservationInterval:         v1alpha1.DefaultObservationInterval,
	}
}

// AddFlags binds o to fs with Cluster API providers' flag names; the current values of o are the
// defaults shown.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection,
		"Enable leader election, so that only one replica of the manager acts at a time.")
	fs.StringVar(&o.LeaderElectionID, "leader-elect-id", o.LeaderElectionID,
		"Name of the Lease the replicas elect a leader with. Managers that share a fleet by --watch-filter need distinct IDs.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-elect-namespace", o.LeaderElectionNamespace,
		"Namespace of the leader-election Lease; empty means the namespace the manager runs in.")
	fs.DurationVar(&o.LeaderElectionLeaseDuration, "leader-elect-lease-duration", o.LeaderElectionLeaseDuration,
		"Interval at which non-leader candidates wait to force acquire leadership.")
	fs.DurationVar(&o.LeaderElectionRenewDeadline, "leader-elect-renew-deadline", o.LeaderElectionRenewDeadline,
		"Duration that the leader retries refreshing leadership before giving up.")
	fs.DurationVar(&o.LeaderElectionRetryPeriod, "leader-elect-retry-period", o.LeaderElectionRetryPeriod,
		"Duration the leader-election clients wait between tries.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace,
		"Namespace whose Clusters the manager handles. If unspecified, all namespaces.")
	fs.StringVar(&o.WatchFilter, "watch-filter", o.WatchFilter,
		fmt.Sprintf("Label value that the manager watches to handle Clusters. Label key is always %s. If unspecified, the manager handles every Cluster.", clusterv1.WatchLabel))
	fs.StringVar(&o.HealthAddr, "health-addr", o.HealthAddr,
		"The address /healthz and /readyz bind to.")
	fs.StringVar(&o.ProfilerAddr, "profiler-address", o.ProfilerAddr,
		"Bind address to expose the pprof profiler (e.g. localhost:6060).")
	flags.AddManagerOptions(fs, &o.Diagnostics)
	fs.BoolVar(&o.Webhooks, "enable-webhooks", o.Webhooks,
		"Serve the quorum guard and Machine hook webhooks (needs a serving certificate in --webhook-cert-dir). Off, delete the MutatingWebhookConfiguration too: it refuses new control-plane Machines when nothing serves it.")
	fs.IntVar(&o.WebhookPort, "webhook-port", o.WebhookPort, "Webhook server port.")
	fs.StringVar(&o.WebhookHost, "webhook-host", o.WebhookHost, "Webhook server bind host; empty means every interface.")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay", o.ShutdownDelay,
		"After SIGTERM, how long the manager runs on, each webhook response closing its connection, before it stops: kube-proxy stops sending the ending Pod new connections and kube-apiserver's pooled ones end meanwhile. Set it longer than endpoint propagation; 0 stops at once.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", o.WebhookCertDir, "Webhook serving certificate directory.")
	fs.StringVar(&o.DiagnosticsCertDir, "diagnostics-cert-dir", o.DiagnosticsCertDir,
		"Directory of the metrics endpoint's serving certificate (tls.crt, tls.key), so a scraper can verify it. Empty: a self-signed certificate.")
	fs.StringVar(&o.WebhookCert, "webhook-cert-name", o.WebhookCert, "Webhook serving certificate file name in --webhook-cert-dir.")
	fs.StringVar(&o.WebhookKey, "webhook-key-name", o.WebhookKey, "Webhook serving key file name in --webhook-cert-dir.")
	fs.IntVar(&o.Concurrency, "controlplaneetcd-concurrency", o.Concurrency,
		"Number of ControlPlaneEtcds (Clusters) reconciled at once; a dead workload cluster holds one worker for at most --etcd-call-timeout.")
	fs.IntVar(&o.ClusterCacheConcurrency, "clustercache-concurrency", o.ClusterCacheConcurrency,
		"Number of workload cluster connections set up at once.")
	fs.Float32Var(&o.ClusterCacheQPS, "clustercache-client-qps", o.ClusterCacheQPS,
		"Maximum queries per second to each workload cluster's apiserver.")
	fs.IntVar(&o.ClusterCacheBurst, "clustercache-client-burst", o.ClusterCacheBurst,
		"Maximum burst of queries to each workload cluster's apiserver.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"Maximum queries per second to the management cluster's apiserver.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst,
		"Maximum burst of queries to the management cluster's apiserver.")
	fs.DurationVar(&o.SyncPeriod, "sync-period", o.SyncPeriod,
		"The minimum interval at which watched objects are reconciled again.")
	fs.DurationVar(&o.EtcdCallTimeout, "etcd-call-timeout", o.EtcdCallTimeout,
		"Bound on one observation of a workload cluster's etcd, dials to kubeadm etcd members included. Must be longer than --etcd-dial-timeout.")
	fs.DurationVar(&o.EtcdDialTimeout, "etcd-dial-timeout", o.EtcdDialTimeout,
		"Bound on opening one port-forward and TLS handshake to a kubeadm etcd member (through the workload apiserver). Must be shorter than --etcd-call-timeout.")
	fs.StringSliceVar(&o.EtcdAllowedNetworks, "etcd-allowed-networks", o.EtcdAllowedNetworks,
		"Comma-separated CIDRs (e.g. 10.0.0.0/8,fd00::/8) the external etcd backend may dial; an endpoint whose host resolves outside them is not dialled. Empty: every address.")
	fs.StringVar(&o.SnapshotScratchDir, "snapshot-scratch-dir", o.SnapshotScratchDir,
		"Directory with room for the largest etcd database, where a snapshot taken before a member removal (spec.snapshot) is checked for bbolt consistency and its revision; empty: only etcd's sha256 trailer and the stored size are checked.")
	fs.DurationVar(&o.ObservationInterval, "observation-interval", o.ObservationInterval,
		"How often each Cluster's etcd is observed when no event arrives, for ControlPlaneEtcds without spec.observationInterval (which wins).")
}

// Validate reports flag values that cannot work together.
func (o *Options) Validate() error {
	var errs []error
	if o.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("--controlplaneetcd-concurrency must be at least 1, got %d", o.Concurrency))
	}
	if o.ClusterCacheConcurrency < 1 {
		errs = append(errs, fmt.Errorf("--clustercache-concurrency must be at least 1, got %d", o.ClusterCacheConcurrency))
	}
	if o.EtcdCallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--etcd-call-timeout must be positive, got %s", o.EtcdCallTimeout))
	}
	if o.EtcdDialTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--etcd-dial-timeout must be positive, got %s", o.EtcdDialTimeout))
	}
	// Note: every dial runs under the deadline of the observation it serves
	// (pkg/kubeadm derives the dial's context from the call's), so a dial timeout that is not
	// shorter than the call timeout never fires: the call's deadline ends the dial first, and
	// leaves no time for the etcd calls after it.
	if o.EtcdCallTimeout > 0 && o.EtcdDialTimeout >= o.EtcdCallTimeout {
		errs = append(errs, fmt.Errorf("--etcd-dial-timeout (%s) must be shorter than --etcd-call-timeout (%s): a dial runs within the call's deadline, so a longer one has no effect",
			o.EtcdDialTimeout, o.EtcdCallTimeout))
	}
	if o.ShutdownDelay < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-delay must not be negative, got %s", o.ShutdownDelay))
	}
	if o.ObservationInterval <= 0 {
		errs = append(errs, fmt.Errorf("--observation-interval must be positive, got %s", o.ObservationInterval))
	}
	if _, err := o.AllowedNetworks(); err != nil {
		errs = append(errs, err)
	}
	if o.LeaderElection && o.LeaderElectionRenewDeadline >= o.LeaderElectionLeaseDuration {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be shorter than --leader-elect-lease-duration (%s)",
			o.LeaderElectionRenewDeadline, o.LeaderElectionLeaseDuration))
	}
	return errors.Join(errs...)
}

// AllowedNetworks parses --etcd-allowed-networks. A value that is not a CIDR is an error naming
// the flag: a typo must not silently allow, or forbid, every address.
func (o *Options) AllowedNetworks() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(o.EtcdAllowedNetworks))
	for _, n := range o.EtcdAllowedNetworks {
		p, err := netip.ParsePrefix(strings.TrimSpace(n))
		if err != nil {
			return nil, fmt.Errorf("--etcd-allowed-networks: %q is not a CIDR (e.g. 10.0.0.0/8): %w", n, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
