package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	capisetup "sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/util/flags"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/metrics"
	"github.com/etcd-adapter/etcd-adapter/controlplane/setup"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

// Name is the manager's informer name and the ClusterCache's user agent source.
const Name = "etcd-adapter-manager"

// managers counts the managers built in this process, to name their informers uniquely.
var managers atomic.Int64

// Scheme returns the types the manager reads and writes: Kubernetes built-ins, CRDs, Cluster
// API's core v1beta2 types and etcd-adapter's v1alpha1.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// New builds the manager with a ClusterCache, the controllers, the webhooks (with o.Webhooks), health and readiness checks and etcd-adapter's metrics. Start it with
// Start(ctx); it stops when ctx ends.
func New(ctx context.Context, cfg *rest.Config, o *Options) (ctrl.Manager, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("invalid options: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	cfg.UserAgent = FieldManager(o) + "/" + Version()

	tlsOptions, metricsOptions, err := flags.GetManagerOptions(o.Diagnostics)
	if err != nil {
		return nil, fmt.Errorf("invalid diagnostics or TLS flags: %w", err)
	}
	tlsOptions = append(tlsOptions, disableHTTP2)
	metricsOptions.TLSOpts = append(metricsOptions.TLSOpts, disableHTTP2)
	if o.DiagnosticsCertDir != "" {
		// Note: with a certificate from cert-manager (config/default) Prometheus verifies the
		// endpoint against its CA instead of skipping verification.
		metricsOptions.CertDir, metricsOptions.CertName, metricsOptions.KeyName = o.DiagnosticsCertDir, "tls.crt", "tls.key"
	}
	scheme := Scheme()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Controller:                    controllerConfig(o),
		Scheme:                        scheme,
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.LeaderElectionLeaseDuration,
		RenewDeadline:                 &o.LeaderElectionRenewDeadline,
		RetryPeriod:                   &o.LeaderElectionRetryPeriod,
		HealthProbeBindAddress:        o.HealthAddr,
		PprofBindAddress:              o.ProfilerAddr,
		Metrics:                       *metricsOptions,
		Cache:                         cacheOptions(scheme, o),
		Client:                        capisetup.ManagerClientOptions(),
		WebhookServer: &webhookServer{Server: webhook.NewServer(webhook.Options{
			Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.WebhookCertDir,
			CertName: o.WebhookCert, KeyName: o.WebhookKey, TLSOpts: tlsOptions,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create the manager: %w", err)
	}
	cc, err := setupClusterCache(ctx, mgr, o)
	if err != nil {
		return nil, err
	}
	if err := addChecks(mgr, o, cc); err != nil {
		return nil, err
	}
	allowed, err := o.AllowedNetworks()
	if err != nil {
		return nil, err
	}
	if _, err := setup.Setup(ctx, mgr, setup.Options{
		ClusterCache: cc, Concurrency: o.Concurrency, Webhooks: o.Webhooks, WatchFilter: o.WatchFilter, Namespace: o.Namespace,
		CallTimeout: o.EtcdCallTimeout, DialTimeout: o.EtcdDialTimeout, ObservationInterval: o.ObservationInterval,
		AllowedNetworks: allowed, SnapshotScratchDir: o.SnapshotScratchDir,
	}); err != nil {
		return nil, fmt.Errorf("failed to set up the etcd-adapter controllers: %w", err)
	}
	if err := addMetrics(mgr); err != nil {
		return nil, err
	}
	return mgr, nil
}

// disableHTTP2 makes the webhook and metrics servers speak HTTP/1.1 only. HTTP/2's stream
// reset flood (CVE-2023-44487, "rapid reset") lets one client keep a server busy at little cost;
// the apiserver calls webhooks and Prometheus scrapes over HTTP/1.1 as well, so nothing is lost.
// The kubebuilder scaffold and Cluster API's managers turn it off the same way.
func disableHTTP2(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
}

// controllerConfig is the configuration every controller of the manager gets.
//
// Note: the controllers use client-go's rate-limited work queue, not controller-runtime's
// priority queue (its default since v0.22). In controller-runtime v0.24.1 the priority queue can
// deadlock on shutdown (kubernetes-sigs/controller-runtime#3538, fixed by #3540 after that
// release): an item that turns ready while a worker waits is handed over on an unbuffered channel
// under the queue's lock, the worker leaves on shutdown instead, and the next worker blocks on
// the lock for ever. The manager then never stops within its grace period, so a rolling update
// or a lost lease leaves a Pod that must be killed. Reconcile errors, which retry after a few
// milliseconds, make it likely.
func controllerConfig(o *Options) config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(o.SkipNameValidation), UsePriorityQueue: ptr.To(false)}
}

// FieldManager is the name the manager's writes are recorded under in managedFields (the user
// agent's first part): "etcd-adapter", or "etcd-adapter-<watch filter>" for a manager that shares
// a fleet, so every object says which manager wrote it.
func FieldManager(o *Options) string {
	if o.WatchFilter != "" {
		return "etcd-adapter-" + o.WatchFilter
	}
	return "etcd-adapter"
}

// Run builds the manager and runs it until ctx ends and o.ShutdownDelay passed after that, then
// shuts it down gracefully (controllers drained within the manager's graceful shutdown timeout,
// leader election released, the webhook server stopped last).
//
// The delay is for the webhooks of a Pod that Kubernetes ends. The kubelet sends SIGTERM while
// the EndpointSlice controller and kube-proxy are still taking the Pod out of its Service
// (kubernetes-sigs/controller-runtime#3113): a webhook server that stopped at once would refuse
// the connections still sent to it, and close kube-apiserver's pooled ones under requests.
// During the delay the manager works on unchanged, every webhook response closing its
// connection (webhookServer), so that kube-apiserver's next calls go to another replica. The
// Kubernetes API server delays its own shutdown the same way (--shutdown-delay-duration).
func Run(ctx context.Context, cfg *rest.Config, o *Options) error {
	running, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	mgr, err := New(running, cfg, o)
	if err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx)
	go func() {
		select {
		case <-running.Done():
			return
		case <-ctx.Done():
		}
		if s, ok := mgr.GetWebhookServer().(*webhookServer); ok && o.Webhooks && o.ShutdownDelay > 0 {
			log.Info("Draining the webhook connections before stopping", "shutdownDelay", o.ShutdownDelay)
			s.drain()
			select {
			case <-running.Done():
			case <-time.After(o.ShutdownDelay):
			}
		}
		stop()
	}()
	log.Info("Starting manager", "version", Version(), "watchFilter", o.WatchFilter, "namespace", o.Namespace)
	if err := mgr.Start(running); err != nil {
		return fmt.Errorf("manager stopped with an error: %w", err)
	}
	return nil
}

// cacheOptions are Cluster API's manager cache options without its Secret entry (Secrets are
// never cached), restricted to --namespace, and with
// --watch-filter to the Clusters that carry the label. Every controller and the quorum guard
// read Clusters through this cache, so a Cluster outside the filter does not exist for this
// manager: nothing of it is read from its workload cluster or written. Machines are cached
// trimmed (setup.MachineCacheOptions): worker Machines keep only their identity and labels, so
// memory grows with the fleet's control-plane and etcd Machines, not with its workers. Managed
// fields are stripped from every cached object.
func cacheOptions(scheme *runtime.Scheme, o *Options) cache.Options {
	// Note: client-go refuses a second informer name in one process; only the first manager of
	// a process (the only one, outside tests and the demo) gets the plain name.
	informerName := Name
	if n := managers.Add(1); n > 1 {
		informerName = fmt.Sprintf("%s-%d", Name, n)
	}
	opts := capisetup.ManagerCacheOptions(scheme, informerName, o.Namespace, o.SyncPeriod)
	// Nothing reads Secrets from the cache (see setupClusterCache), and the role grants no list
	// or watch on them: no Secret informer may ever start.
	for obj := range opts.ByObject {
		if _, ok := obj.(*corev1.Secret); ok {
			delete(opts.ByObject, obj)
		}
	}
	// Nothing reads managed fields, and they are often the larger part of an object's metadata.
	opts.DefaultTransform = cache.TransformStripManagedFields()
	opts.ByObject[&clusterv1.Machine{}] = setup.MachineCacheOptions()
	if o.WatchFilter != "" {
		opts.ByObject[&clusterv1.Cluster{}] = cache.ByObject{
			Label: labels.SelectorFromSet(labels.Set{clusterv1.WatchLabel: o.WatchFilter}),
		}
	}
	return opts
}

// setupClusterCache sets up Cluster API's ClusterCache so that it connects on every replica, not
// only on the elected leader: the quorum guard is served by every replica (the webhook Service
// routes to any Ready Pod, and during a rolling update to the surge Pod before it leads), and it
// must answer from a real observation there too. The ClusterCache's reconciler only reads (the
// Cluster, its kubeconfig Secret, the workload apiserver's health); everything that writes stays
// on the leader. Note: the ClusterCache sends a connect event to every GetClusterSource consumer
// on an unbuffered channel, so every such consumer must read it on a replica that does not lead
// too (controlplane/setup turns on the ControlPlaneEtcd controller's warm-up for that).
func setupClusterCache(ctx context.Context, mgr ctrl.Manager, o *Options) (clustercache.ClusterCache, error) {
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		// Note: the kubeconfig Secret is read uncached, as every other Secret the manager reads
		// (the manager's client does not cache Secrets: capisetup.ManagerClientOptions). A
		// caching client would list and watch the Secrets of every namespace, which needs
		// list and watch on secrets; a GET per connection needs get only.
		SecretClient:     mgr.GetAPIReader(),
		Cache:            clusterCacheOptions(),
		Client:           capisetup.ClusterCacheClientOptions(Name, o.ClusterCacheQPS, o.ClusterCacheBurst),
		WatchFilterValue: o.WatchFilter,
	}, controller.Options{MaxConcurrentReconciles: o.ClusterCacheConcurrency, NeedLeaderElection: ptr.To(false)})
	if err != nil {
		return nil, fmt.Errorf("failed to set up the ClusterCache: %w", err)
	}
	return cc, nil
}

// clusterCacheOptions are Cluster API's cache options for workload clusters, with the Node
// informer restricted to etcd Nodes and trimmed (k3s.NodeCacheOptions). A workload cluster's
// cache otherwise holds every Node, workers included, whole: memory per cluster would grow with
// its worker count. Nodes are the only workload objects the manager caches: the K3s backend
// reads etcd Nodes from the cache and the controllers watch them; the kubeadm backend lists
// Nodes and etcd Pods live.
//
// Without Cluster API's Node provider-ID index: it is for Cluster API's Machine controller, which
// looks Nodes up by spec.providerID; etcd-adapter never does. Adding an index starts the Node
// informer when the ClusterCache connects, so every kubeadm Cluster held a watch and its
// goroutines that nothing read; K3s and RKE2 Clusters start it with their Node watch.
func clusterCacheOptions() clustercache.CacheOptions {
	o := capisetup.ClusterCacheCacheOptions()
	o.Indexes = nil
	// Note: a ByObject transform replaces the DefaultTransform (which strips managed fields)
	// for that type; k3s.TrimNode strips them too.
	o.ByObject = map[client.Object]cache.ByObject{&corev1.Node{}: k3s.NodeCacheOptions()}
	return o
}

// addChecks adds /healthz (the process serves; the webhook server started) and /readyz (the
// caches synced; the ClusterCache tried every served Cluster once; the webhook server started).
func addChecks(mgr ctrl.Manager, o *Options, cc clustercache.ClusterCache) error {
	synced := &cacheSynced{cache: mgr.GetCache()}
	if err := mgr.Add(synced); err != nil {
		return fmt.Errorf("failed to add the cache readiness check: %w", err)
	}
	connections := &clusterConnections{synced: synced, reader: mgr.GetCache(), clusterCache: cc}
	checks := []struct {
		name    string
		add     func(string, healthz.Checker) error
		checker healthz.Checker
	}{
		{"ping", mgr.AddHealthzCheck, healthz.Ping},
		{"caches", mgr.AddReadyzCheck, synced.Check},
		{"clustercache", mgr.AddReadyzCheck, connections.Check},
	}
	if o.Webhooks {
		checks = append(checks,
			struct {
				name    string
				add     func(string, healthz.Checker) error
				checker healthz.Checker
			}{"webhook", mgr.AddHealthzCheck, mgr.GetWebhookServer().StartedChecker()},
			struct {
				name    string
				add     func(string, healthz.Checker) error
				checker healthz.Checker
			}{"webhook", mgr.AddReadyzCheck, mgr.GetWebhookServer().StartedChecker()})
	}
	for _, c := range checks {
		if err := c.add(c.name, c.checker); err != nil {
			return fmt.Errorf("failed to add the %s check: %w", c.name, err)
		}
	}
	return nil
}

// cacheSynced is ready once the manager's informers synced. It runs on every replica, elected
// or not, so a standby replica is ready too.
type cacheSynced struct {
	cache  cache.Cache
	synced atomic.Bool
}

func (c *cacheSynced) NeedLeaderElection() bool { return false }

func (c *cacheSynced) Start(ctx context.Context) error {
	if c.cache.WaitForCacheSync(ctx) {
		c.synced.Store(true)
	}
	return nil
}

// Check is the readiness checker.
func (c *cacheSynced) Check(*http.Request) error {
	if !c.synced.Load() {
		return errors.New("caches not synced yet")
	}
	return nil
}

// statusCollector is registered once per process; the newest manager's cache serves it (tests
// and the demo may build more than one manager in one process).
var (
	collectorOnce sync.Once
	collector     = &swappableCollector{}
)

type swappableCollector struct {
	mu sync.RWMutex
	c  *metrics.StatusCollector
}

func (s *swappableCollector) set(r client.Reader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c = &metrics.StatusCollector{Reader: r}
}

func (s *swappableCollector) Describe(ch chan<- *prometheus.Desc) {
	(&metrics.StatusCollector{}).Describe(ch)
}

func (s *swappableCollector) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	c := s.c
	s.mu.RUnlock()
	if c != nil {
		c.Collect(ch)
	}
}

func addMetrics(mgr ctrl.Manager) error {
	collector.set(mgr.GetClient())
	var err error
	collectorOnce.Do(func() { err = ctrlmetrics.Registry.Register(collector) })
	if err != nil {
		return fmt.Errorf("failed to register the status metrics: %w", err)
	}
	if err := mgr.Add(&metrics.RemovalRecorder{Informers: mgr.GetCache()}); err != nil {
		return fmt.Errorf("failed to add the removal metrics recorder: %w", err)
	}
	klog.FromContext(context.Background()).V(4).Info("Registered etcd-adapter metrics")
	return nil
}
