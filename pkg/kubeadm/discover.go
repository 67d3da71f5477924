package kubeadm

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// etcdPodSelector selects kubeadm's etcd static Pods (their mirror Pods carry these labels).
const etcdPodSelector = "component=etcd,tier=control-plane"

// discover returns the Nodes running an etcd Pod, to find members when none of those seen
// before answers (first observation, or every known member gone).
func (b *Backend) discover(ctx context.Context) ([]string, error) {
	cfg, err := b.cfg.RESTConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", etcd.ErrUnreachable, err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = b.cfg.CallTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create a client for the workload apiserver: %w", err)
	}
	pods, err := call(ctx, b, "list etcd Pods", func(ctx context.Context) ([]string, error) {
		list, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: etcdPodSelector})
		if err != nil {
			return nil, err
		}
		var nodes []string
		for _, p := range list.Items {
			if p.Spec.NodeName != "" && p.Name == podName(p.Spec.NodeName) {
				nodes = append(nodes, p.Spec.NodeName)
			}
		}
		return nodes, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: failed to list etcd Pods in the workload cluster: %w", etcd.ErrUnreachable, err)
	}
	return pods, nil
}
