package kubeadm

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// podCache keeps kubeadm's etcd Pods of the workload cluster in an informer (kube-system, the
// etcd labels only), so asking every etcd Pod on every observation costs a cache read, not an
// apiserver round trip. It is started on first use, restarted when the REST config changes
// (the ClusterCache reconnected), and stopped by close.
type podCache struct {
	mu      sync.Mutex
	cfg     *rest.Config
	factory informers.SharedInformerFactory
	lister  listersv1.PodLister
	synced  cache.InformerSynced
	stop    chan struct{}
	closed  bool
}

// listerFor returns a synced lister of the etcd Pods for cfg, starting the informer when needed.
func (p *podCache) listerFor(ctx context.Context, cfg *rest.Config, timeout time.Duration) (listersv1.PodLister, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errClosed
	}
	if p.cfg != cfg {
		p.stopLocked()
		// Its own clientset: the watch must not end at a request timeout.
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			p.mu.Unlock()
			return nil, fmt.Errorf("failed to create a client for the workload apiserver: %w", err)
		}
		p.start(cfg, cs)
	}
	lister, synced := p.lister, p.synced
	p.mu.Unlock()
	if err := waitSynced(ctx, synced, timeout); err != nil {
		return nil, err
	}
	return lister, nil
}

// waitSynced waits until the informer listed once, at most timeout.
func waitSynced(ctx context.Context, synced cache.InformerSynced, timeout time.Duration) error {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("call timeout %s expired", timeout))
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !synced() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: failed to list etcd Pods in the workload cluster: %w", etcd.ErrUnreachable, context.Cause(ctx))
		case <-tick.C:
		}
	}
	return nil
}

func (p *podCache) start(cfg *rest.Config, cs kubernetes.Interface) {
	p.cfg, p.stop = cfg, make(chan struct{})
	p.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithNamespace(metav1.NamespaceSystem),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = etcdPodSelector }))
	inf := p.factory.Core().V1().Pods()
	p.lister, p.synced = inf.Lister(), inf.Informer().HasSynced
	p.factory.Start(p.stop)
}

func (p *podCache) stopLocked() {
	if p.factory == nil {
		return
	}
	close(p.stop)
	p.factory.Shutdown()
	p.factory, p.cfg = nil, nil
}

// close stops the informer and waits for its goroutines; it is idempotent.
func (p *podCache) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.stopLocked()
}

// etcdPodNodes returns the Nodes of the listed etcd Pods.
func etcdPodNodes(pods []*corev1.Pod) map[string]bool {
	nodes := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.Name == podName(p.Spec.NodeName) && p.DeletionTimestamp == nil {
			nodes[p.Spec.NodeName] = true
		}
	}
	return nodes
}

// listEtcdPods reads the etcd Pods from the informer.
func (b *Backend) listEtcdPods(ctx context.Context) (map[string]bool, error) {
	cfg, err := b.cfg.RESTConfig(ctx)
	if err != nil {
		return nil, classifyAPIError(err, "failed to get the workload cluster's REST config")
	}
	lister, err := b.pods.listerFor(ctx, cfg, b.cfg.CallTimeout)
	if err != nil {
		return nil, err
	}
	pods, err := lister.Pods(metav1.NamespaceSystem).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("failed to list etcd Pods from the cache: %w", err)
	}
	return etcdPodNodes(pods), nil
}
