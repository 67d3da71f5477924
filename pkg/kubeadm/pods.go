package kubeadm

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// podCache keeps kubeadm's etcd Pods of the workload cluster in an informer (kube-system, the
// etcd labels only, trimmed by trimPod), so asking every etcd Pod on every observation costs a
// cache read, not an apiserver round trip. It is started on first use, restarted when the REST
// config changes (the ClusterCache reconnected), and stopped by close.
type podCache struct {
	mu     sync.Mutex
	cfg    *rest.Config
	lister listersv1.PodLister
	synced cache.InformerSynced
	stop   chan struct{}
	done   sync.WaitGroup
	closed bool
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
		// Its own client: the watch must not end at a request timeout. The core group's client
		// only: a whole clientset builds a REST client for each of the ~50 API groups, which
		// was the largest part of a kubeadm Cluster's memory after its connections.
		cs, err := corev1client.NewForConfig(cfg)
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

func (p *podCache) start(cfg *rest.Config, cs corev1client.CoreV1Interface) {
	p.cfg, p.stop = cfg, make(chan struct{})
	lw := cache.NewFilteredListWatchFromClient(cs.RESTClient(), "pods", metav1.NamespaceSystem,
		func(o *metav1.ListOptions) { o.LabelSelector = etcdPodSelector })
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	// Note: SetTransform fails only once the informer runs.
	_ = inf.SetTransform(trimPod)
	p.lister, p.synced = listersv1.NewPodLister(inf.GetIndexer()), inf.HasSynced
	stop := p.stop
	p.done.Go(func() { inf.Run(stop) })
}

func (p *podCache) stopLocked() {
	if p.stop == nil {
		return
	}
	close(p.stop)
	p.done.Wait()
	p.stop, p.cfg = nil, nil
}

// trimPod keeps what etcdPodNodes reads of an etcd Pod (its name, Node and deletion) and what
// the informer needs (namespace, UID, resourceVersion, labels): a static etcd Pod's spec and
// status (the whole etcd command line, volumes, container statuses) would otherwise be kept
// for every member of every Cluster.
func trimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			Labels: pod.Labels, DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName},
	}, nil
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
