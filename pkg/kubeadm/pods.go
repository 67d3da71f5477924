package kubeadm

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm/internal/portforward"
)

// listEtcdPods lists kubeadm's etcd Pods (kube-system, the etcd labels) and returns their Nodes.
//
// It lists on every observation, in parallel with asking the members seen last (askMembers),
// rather than keeping an informer: an informer per Cluster is a watch and about nine goroutines
// held for the life of the backend, which at 1,000 Clusters was about a tenth of the manager's
// memory, to save one small request per observation (every 30 s by default) that runs while the
// members are asked anyway. A live list is also never older than the observation.
//
// kubeadm runs one etcd Pod per member, so more than etcd.MaxMembers of them is etcd.ErrTooLarge:
// one request of at most etcd.MaxMembers+1 Pods is read, never the rest, and none is asked. A
// workload cluster's admins may create any number of Pods with these labels.
func (b *Backend) listEtcdPods(ctx context.Context) (map[string]bool, error) {
	cs, err := b.coreClient(ctx)
	if err != nil {
		return nil, err
	}
	list, err := call(ctx, b, "list etcd Pods", func(ctx context.Context) (*corev1.PodList, error) {
		return cs.Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: etcdPodSelector, Limit: etcd.MaxMembers + 1})
	})
	if err != nil {
		return nil, classifyAPIError(err, "failed to list etcd Pods in the workload cluster")
	}
	if len(list.Items) > etcd.MaxMembers {
		return nil, fmt.Errorf("%w: the workload cluster has more than %d etcd Pods (%s in %s)", etcd.ErrTooLarge, etcd.MaxMembers, etcdPodSelector, metav1.NamespaceSystem)
	}
	return etcdPodNodes(list.Items), nil
}

// etcdPodNodes returns the Nodes of the listed etcd Pods: kubeadm names the static Pod
// etcd-<node>, and a Pod being deleted runs no member to ask.
func etcdPodNodes(pods []corev1.Pod) map[string]bool {
	nodes := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != "" && p.Name == portforward.PodName(p.Spec.NodeName) && p.DeletionTimestamp == nil {
			nodes[p.Spec.NodeName] = true
		}
	}
	return nodes
}
