package kubeadm

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// etcdPodSelector selects kubeadm's etcd static Pods (their mirror Pods carry these labels).
const etcdPodSelector = "component=etcd,tier=control-plane"

// workloadClient keeps one core group client per REST config, so listing on every observation reuses
// the apiserver connection instead of building a transport each time.
type workloadClient struct {
	mu  sync.Mutex
	cfg *rest.Config
	cs  corev1client.CoreV1Interface
}

func (w *workloadClient) get(cfg *rest.Config, timeout func() *rest.Config) (corev1client.CoreV1Interface, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cs != nil && w.cfg == cfg {
		return w.cs, nil
	}
	// The core group's client only (Nodes, etcd Pods): a whole clientset builds a REST client per
	// API group. Protobuf: the apiserver encodes core types faster, and they decode faster here.
	c := timeout()
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := corev1client.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("failed to create a client for the workload apiserver: %w", err)
	}
	w.cfg, w.cs = cfg, cs
	return cs, nil
}

// coreClient returns the workload cluster's core group client.
func (b *Backend) coreClient(ctx context.Context) (corev1client.CoreV1Interface, error) {
	cfg, err := b.cfg.RESTConfig(ctx)
	if err != nil {
		return nil, classifyAPIError(err, "failed to get the workload cluster's REST config")
	}
	return b.workload.get(cfg, func() *rest.Config {
		c := rest.CopyConfig(cfg)
		c.Timeout = b.cfg.CallTimeout
		return c
	})
}

// Bounds on listing a workload cluster's Nodes: every Node is listed (a member is placed on its
// Node by name or InternalIP, and a control-plane Node need not carry a role label), a page at a
// time, keeping each Node's name and InternalIPs only.
const (
	// nodePageSize is the most Nodes one list request returns. A Node of a real cluster is a
	// few KiB to a few tens of KiB (status.images is most of it), so a page is a few MiB at
	// most; the apiserver bounds each object to etcd's request size (1.5 MiB by default).
	nodePageSize = 100

	// maxNodes is the most Nodes read from one workload cluster: twice the 5,000 Nodes
	// Kubernetes supports in one cluster (kubernetes.io/docs/setup/best-practices/cluster-large).
	maxNodes = 10_000
)

// listNodes fills facts with every Node and its InternalIPs, a page at a time. More than maxNodes
// Nodes is etcd.ErrTooLarge.
func (b *Backend) listNodes(ctx context.Context, facts *nodeFacts) error {
	cs, err := b.coreClient(ctx)
	if err != nil {
		return err
	}
	facts.nodes, facts.byIP = map[string]bool{}, map[string][]string{}
	opts := metav1.ListOptions{Limit: nodePageSize}
	for {
		list, err := call(ctx, b, "list Nodes", func(ctx context.Context) (*corev1.NodeList, error) {
			return cs.Nodes().List(ctx, opts)
		})
		if err != nil {
			return classifyAPIError(err, "failed to list Nodes in the workload cluster")
		}
		for _, n := range list.Items {
			facts.nodes[n.Name] = true
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					facts.byIP[a.Address] = append(facts.byIP[a.Address], n.Name)
				}
			}
		}
		if len(facts.nodes) > maxNodes {
			return fmt.Errorf("%w: the workload cluster has more than %d Nodes", etcd.ErrTooLarge, maxNodes)
		}
		if list.Continue == "" {
			return nil
		}
		opts.Continue = list.Continue
	}
}

// classifyAPIError keeps the class of a workload apiserver error: a refusal for lack of
// permission (401, 403) is a configuration problem that retrying does not fix
// (etcd.ErrInvalidInput), not an unreachable etcd; errors that carry a class already keep it;
// anything else means the apiserver could not be used (etcd.ErrUnreachable).
func classifyAPIError(err error, what string) error {
	switch {
	case isClassified(err):
		return fmt.Errorf("%s: %w", what, err)
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return fmt.Errorf("%w: %s: %w", etcd.ErrInvalidInput, what, err)
	}
	return fmt.Errorf("%w: %s: %w", etcd.ErrUnreachable, what, err)
}
