package manager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/rbaccheck"
)

var mgmt *env.Management

// TestMain starts one management cluster (Cluster API's CRDs and controllers, etcd-adapter's
// CRDs and the quorum guard's webhook configuration) for every test of the package.
func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	mgmt, err = env.StartManagementWith(ctx, env.ManagementOptions{
		Scheme:            Scheme(),
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "config", "crd", "bases")},
		Webhooks: &envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join("..", "..", "..", "config", "webhook", "manifests.yaml")},
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed to start the management cluster: %v\n", err)
		cancel()
		os.Exit(1)
	}
	code := m.Run()
	if err := mgmt.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "failed to stop the management cluster: %v\n", err)
		code = 1
	}
	cancel()
	os.Exit(code)
}

func TestOptions_Validate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		// expectErr is the error Validate returns, empty when the options are valid.
		expectErr string
	}{
		{name: "defaults are valid", change: func(*Options) {}},
		{name: "zero concurrency", change: func(o *Options) { o.Concurrency = 0 },
			expectErr: "--controlplaneetcd-concurrency must be at least 1, got 0"},
		{name: "zero ClusterCache concurrency", change: func(o *Options) { o.ClusterCacheConcurrency = 0 },
			expectErr: "--clustercache-concurrency must be at least 1, got 0"},
		{name: "zero etcd call timeout", change: func(o *Options) { o.EtcdCallTimeout = 0 },
			expectErr: "--etcd-call-timeout must be positive, got 0s"},
		{name: "negative etcd call timeout", change: func(o *Options) { o.EtcdCallTimeout = -time.Second },
			expectErr: "--etcd-call-timeout must be positive, got -1s"},
		{name: "zero etcd dial timeout", change: func(o *Options) { o.EtcdDialTimeout = 0 },
			expectErr: "--etcd-dial-timeout must be positive, got 0s"},
		{name: "negative etcd dial timeout", change: func(o *Options) { o.EtcdDialTimeout = -time.Second },
			expectErr: "--etcd-dial-timeout must be positive, got -1s"},
		{name: "a dial timeout as long as the call timeout has no effect and is refused", change: func(o *Options) {
			o.EtcdDialTimeout, o.EtcdCallTimeout = 10*time.Second, 10*time.Second
		}, expectErr: "--etcd-dial-timeout (10s) must be shorter than --etcd-call-timeout (10s): a dial runs within the call's deadline, so a longer one has no effect"},
		{name: "a dial timeout longer than the call timeout has no effect and is refused", change: func(o *Options) {
			o.EtcdDialTimeout, o.EtcdCallTimeout = 30*time.Second, 5*time.Second
		}, expectErr: "--etcd-dial-timeout (30s) must be shorter than --etcd-call-timeout (5s): a dial runs within the call's deadline, so a longer one has no effect"},
		{name: "a dial timeout shorter than the call timeout is accepted", change: func(o *Options) {
			o.EtcdDialTimeout, o.EtcdCallTimeout = 4*time.Second, 5*time.Second
		}},
		{name: "zero observation interval", change: func(o *Options) { o.ObservationInterval = 0 },
			expectErr: "--observation-interval must be positive, got 0s"},
		{name: "negative observation interval", change: func(o *Options) { o.ObservationInterval = -time.Minute },
			expectErr: "--observation-interval must be positive, got -1m0s"},
		{name: "negative shutdown delay", change: func(o *Options) { o.ShutdownDelay = -time.Second },
			expectErr: "--shutdown-delay must not be negative, got -1s"},
		{name: "a shutdown delay is accepted", change: func(o *Options) { o.ShutdownDelay = 10 * time.Second }},
		{name: "allowed networks that are CIDRs are accepted", change: func(o *Options) { o.EtcdAllowedNetworks = []string{"10.0.0.0/8", " fd00::/8"} }},
		{name: "an allowed network that is not a CIDR is refused, naming the flag", change: func(o *Options) { o.EtcdAllowedNetworks = []string{"10.0.0.0/8", "10.0.0.1"} },
			expectErr: `--etcd-allowed-networks: "10.0.0.1" is not a CIDR (e.g. 10.0.0.0/8): netip.ParsePrefix("10.0.0.1"): no '/'`},
		{name: "renew deadline not shorter than the lease", change: func(o *Options) {
			o.LeaderElection, o.LeaderElectionRenewDeadline = true, o.LeaderElectionLeaseDuration
		}, expectErr: "--leader-elect-renew-deadline (15s) must be shorter than --leader-elect-lease-duration (15s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o := NewOptions()
			tt.change(o)
			if tt.expectErr != "" {
				g.Expect(o.Validate()).To(MatchError(tt.expectErr))
				return
			}
			g.Expect(o.Validate()).To(Succeed())
		})
	}
}

// TestOptions_AddFlags: the etcd and observation flags parse into Options, and a non-positive
// value is refused at start-up with the flag's name.
func TestOptions_AddFlags(t *testing.T) {
	g := NewWithT(t)
	o := NewOptions()
	g.Expect(o.EtcdDialTimeout).To(Equal(kubeadm.DefaultDialTimeout))
	g.Expect(o.ObservationInterval).To(Equal(v1alpha1.DefaultObservationInterval))
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	g.Expect(o.EtcdAllowedNetworks).To(BeEmpty(), "every address is allowed by default")
	g.Expect(fs.Parse([]string{"--etcd-dial-timeout=3s", "--observation-interval=1m30s", "--etcd-call-timeout=7s", "--etcd-allowed-networks=10.0.0.0/8,fd00::/8"})).To(Succeed())
	allowed, err := o.AllowedNetworks()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(allowed).To(Equal([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}))
	g.Expect(o.EtcdDialTimeout).To(Equal(3 * time.Second))
	g.Expect(o.ObservationInterval).To(Equal(90 * time.Second))
	g.Expect(o.EtcdCallTimeout).To(Equal(7 * time.Second))
	g.Expect(o.Validate()).To(Succeed())

	g.Expect(fs.Parse([]string{"--observation-interval=0s"})).To(Succeed())
	_, err = New(context.Background(), mgmt.Config, o)
	g.Expect(err).To(MatchError(ContainSubstring("--observation-interval must be positive, got 0s")))
}

// TestRun runs the manager as its ServiceAccount would, with nothing but the generated RBAC
// (config/rbac: the ClusterRole from the markers and the leader-election Role), leader election
// on, its webhook served as the management apiserver calls it and its metrics as deployed (TLS,
// GET /metrics authorized by SubjectAccessReview). It checks /healthz, /readyz, that neither the
// webhook nor the metrics server speaks HTTP/2, /metrics scraped with the token of an identity
// bound to the metrics-reader ClusterRole, that a Cluster gets its ControlPlaneEtcd with a
// status, and that cancelling the context shuts the manager down without error (and releases
// the Lease).
func TestRun(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := createNamespace(ctx, g)
	cfg := asServiceAccount(ctx, g, ns)
	recorder := rbaccheck.NewRecorder()
	recorder.Wrap(cfg)

	o, health, diagnostics := testOptions(g)
	o.LeaderElection, o.LeaderElectionNamespace = true, ns
	o.Diagnostics.InsecureDiagnostics = false
	scrape := metricsScraper(ctx, g, ns)
	wh := mgmt.WebhookInstallOptions()
	o.WebhookHost, o.WebhookPort, o.WebhookCertDir = wh.LocalServingHost, wh.LocalServingPort, wh.LocalServingCertDir
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, cfg, o) }()

	g.Eventually(func() (int, error) { return statusOf("http://" + health + "/readyz") }).WithTimeout(time.Minute).Should(Equal(http.StatusOK))
	g.Expect(statusOf("http://" + health + "/healthz")).To(Equal(http.StatusOK))
	g.Expect(webhookProtocol(wh)).To(Equal("http/1.1"), "HTTP/2 is off on the webhook server (CVE-2023-44487)")
	// The metrics server's certificate is self-signed (no --diagnostics-cert-dir): only the
	// protocol it agrees to is asked here.
	selfSigned := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // only the protocol agreed to is checked
	g.Eventually(func() (string, error) { return negotiatedProtocol(diagnostics, selfSigned) }).WithTimeout(time.Minute).
		Should(Equal("http/1.1"), "HTTP/2 is off on the metrics server (CVE-2023-44487)")

	cluster := createCluster(ctx, g, ns, "k3s-a", nil)
	// The ClusterCache connects to a Cluster whose infrastructure is provisioned, reading its
	// kubeconfig Secret first (sigs.k8s.io/cluster-api controllers/clustercache/cluster_cache.go).
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(mgmt.Client.Status().Update(ctx, cluster)).To(Succeed())
	cpe := waitForStatus(ctx, g, ns, cluster.Name)
	g.Expect(cpe.Spec.Backend).To(Equal(v1alpha1.BackendK3s))
	g.Expect(cpe.Spec.Mode).To(Equal(v1alpha1.ModeManage))

	g.Eventually(func() (string, error) { return scrape("https://" + diagnostics + "/metrics") }).WithTimeout(time.Minute).Should(And(
		ContainSubstring(`etcdadapter_status_collect_errors 0`),
		MatchRegexp(`etcdadapter_available\{backend="k3s",cluster="k3s-a",namespace="%s",reason="[A-Za-z]+"\} -1`, ns),
		ContainSubstring(`controller_runtime_reconcile_total{controller="controlplaneetcd"`),
		MatchRegexp(`etcdadapter_observation_duration_seconds_count\{backend="k3s",result="(success|error)"\} [1-9]`),
	))

	// The ClusterCache read the Cluster's kubeconfig Secret by name (it does not exist), and
	// nothing listed or watched Secrets: the role grants get only.
	kubeconfig := rbaccheck.Request{Verb: "get", Resource: "secrets", Namespace: ns, Name: cluster.Name + "-kubeconfig"}
	g.Eventually(recorder.ResourceRequests).WithTimeout(time.Minute).Should(ContainElement(kubeconfig))
	stop()
	g.Expect(<-done).To(Succeed())
	for _, r := range recorder.Requests() {
		g.Expect(r.Code).NotTo(BeElementOf(http.StatusUnauthorized, http.StatusForbidden), "the apiserver refused %s", r)
		if r.Resource == "secrets" {
			g.Expect(r.Verb).To(Equal("get"), "the manager's Secret requests: %s", r)
		}
	}
}

// TestWatchFilter runs two managers that share a fleet by --watch-filter: each creates and writes
// the ControlPlaneEtcd of its own Cluster only (labelled with its shard, as the Cluster), and a
// Cluster without the label gets none.
func TestWatchFilter(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := createNamespace(ctx, g)

	for _, shard := range []string{"a", "b"} {
		o, _, _ := testOptions(g)
		o.WatchFilter, o.Webhooks = shard, false
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- Run(runCtx, mgmt.Config, o) }()
		t.Cleanup(func() {
			stop()
			g.Expect(<-done).To(Succeed())
		})
	}
	unlabelled := createCluster(ctx, g, ns, "nobody", nil)
	clusters := map[string]*clusterv1.Cluster{}
	for _, shard := range []string{"a", "b"} {
		clusters[shard] = createCluster(ctx, g, ns, "shard-"+shard, map[string]string{clusterv1.WatchLabel: shard})
	}
	for shard, cluster := range clusters {
		cpe := waitForStatus(ctx, g, ns, cluster.Name)
		g.Expect(managersOf(cpe)).To(And(Not(BeEmpty()), HaveEach("etcd-adapter-"+shard)), "ControlPlaneEtcd %s", cpe.Name)
		g.Expect(cpe.Labels).To(HaveKeyWithValue(clusterv1.WatchLabel, shard), "ControlPlaneEtcd %s carries its Cluster's shard", cpe.Name)
		c := &clusterv1.Cluster{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
		g.Expect(managersOf(c)).NotTo(ContainElement(HavePrefix("etcd-adapter")))
	}
	// Both shards converged on their own Clusters; neither touched the unlabelled one.
	err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: unlabelled.Name}, &v1alpha1.ControlPlaneEtcd{})
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	g.Expect(err).To(HaveOccurred(), "a Cluster without the watch-filter label got a ControlPlaneEtcd")
}

func testOptions(g Gomega) (o *Options, health, diagnostics string) {
	health, diagnostics = freeAddr(g), freeAddr(g)
	o = NewOptions()
	o.HealthAddr = health
	o.Diagnostics.DiagnosticsAddress, o.Diagnostics.InsecureDiagnostics = diagnostics, true
	o.SkipNameValidation = true
	return o, health, diagnostics
}

func freeAddr(g Gomega) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

func statusOf(url string) (int, error) {
	resp, err := http.Get(url) //nolint:noctx // a local probe
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	return resp.StatusCode, nil
}

func createNamespace(ctx context.Context, g Gomega) string {
	nsObj := newNamespace()
	g.Expect(mgmt.Client.Create(ctx, nsObj)).To(Succeed())
	return nsObj.Name
}

// createCluster creates a Cluster whose control plane is a KThreesControlPlane (not installed:
// only the reference matters), with no kubeconfig Secret, so its etcd is unreachable.
func createCluster(ctx context.Context, g Gomega, ns, name string, labels map[string]string) *clusterv1.Cluster {
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KThreesControlPlane", Name: name,
		}},
	}
	g.Expect(mgmt.Client.Create(ctx, c)).To(Succeed())
	return c
}

// waitForStatus waits until the Cluster's ControlPlaneEtcd exists and carries an
// EtcdClusterHealthy condition.
func waitForStatus(ctx context.Context, g Gomega, ns, name string) *v1alpha1.ControlPlaneEtcd {
	cpe := &v1alpha1.ControlPlaneEtcd{}
	g.Eventually(func(g Gomega) {
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cpe)).To(Succeed())
		g.Expect(conditions.Get(cpe, v1alpha1.EtcdClusterHealthyCondition)).NotTo(BeNil())
	}).WithTimeout(time.Minute).Should(Succeed())
	return cpe
}

func managersOf(obj client.Object) []string {
	var out []string
	for _, f := range obj.GetManagedFields() {
		if f.Manager != "" && f.Manager != "before-first-apply" {
			out = append(out, f.Manager)
		}
	}
	return out
}

// webhookProtocol is the application protocol the webhook server agrees to with a client that
// offers HTTP/2 first, as the apiserver's client does.
func webhookProtocol(wh *envtest.WebhookInstallOptions) (string, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(wh.LocalServingCAData) {
		return "", fmt.Errorf("no CA certificate in envtest's webhook serving CA data")
	}
	return negotiatedProtocol(net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort)), &tls.Config{RootCAs: roots})
}

// negotiatedProtocol is the application protocol the TLS server at addr agrees to with a client
// that offers HTTP/2 first, as Go's and the apiserver's clients do.
func negotiatedProtocol(addr string, cfg *tls.Config) (string, error) {
	cfg = cfg.Clone()
	cfg.NextProtos, cfg.MinVersion = []string{"h2", "http/1.1"}, tls.VersionTLS12
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }() // only the handshake's outcome is asked for
	return conn.ConnectionState().NegotiatedProtocol, nil
}

// metricsScraper makes a ServiceAccount bound to config/rbac's metrics-reader ClusterRole, as a
// Prometheus is, and returns a scrape with its token. The metrics server's certificate is
// self-signed (no --diagnostics-cert-dir), so it is not verified.
func metricsScraper(ctx context.Context, g Gomega, ns string) func(url string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}}
	g.Expect(mgmt.Client.Create(ctx, sa)).To(Succeed())
	role := &rbacv1.ClusterRole{}
	readYAML(g, filepath.Join("..", "..", "..", "config", "rbac", "metrics_reader_role.yaml"), role)
	role.ObjectMeta = metav1.ObjectMeta{Name: "etcd-adapter-metrics-reader-" + ns}
	g.Expect(mgmt.Client.Create(ctx, role)).To(Succeed())
	g.Expect(mgmt.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
	})).To(Succeed())
	token := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	g.Expect(mgmt.Client.SubResource("token").Create(ctx, sa, token)).To(Succeed())
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a self-signed certificate
	}}
	return func(url string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+token.Status.Token)
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
		}
		return string(b), err
	}
}
