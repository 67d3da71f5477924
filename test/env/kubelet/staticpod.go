package kubelet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EtcdPort is the port of the etcd client endpoint in a kubeadm etcd Pod, the one KCP
// port-forwards to.
const EtcdPort = 2379

// EtcdPodName returns the name of the kubeadm etcd static Pod on nodeName: etcd-<node>.
func EtcdPodName(nodeName string) string { return "etcd-" + nodeName }

// CreateEtcdPod creates the mirror Pod of kubeadm's etcd static Pod, kube-system/etcd-<node>,
// bound to the Node and already Running and Ready, as the kubelet reports it. It creates the
// kube-system Namespace if it does not exist yet. The Node must exist: the Pod has it as owner,
// as every mirror Pod does.
func CreateEtcdPod(ctx context.Context, c client.Client, nodeName string) (*corev1.Pod, error) {
	if err := ensureNamespace(ctx, c, metav1.NamespaceSystem); err != nil {
		return nil, err
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return nil, fmt.Errorf("failed to get Node %s for its etcd Pod: %w", nodeName, err)
	}
	pod := etcdPod(node)
	if err := c.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("failed to create Pod %s: %w", client.ObjectKeyFromObject(pod), err)
	}
	// A patch, not an update: the Node's kubelet stand-in may be marking the Pod at once.
	base := pod.DeepCopy()
	setRunning(&pod.Status, pod.Spec.Containers, internalIP(node))
	if err := c.Status().Patch(ctx, pod, client.MergeFrom(base)); err != nil {
		return nil, fmt.Errorf("failed to mark Pod %s running: %w", client.ObjectKeyFromObject(pod), err)
	}
	return pod, nil
}

// etcdPod returns a mirror Pod shaped like kubeadm's etcd static Pod on node.
func etcdPod(node *corev1.Node) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: metav1.NamespaceSystem,
			Name:      EtcdPodName(node.Name),
			Labels:    map[string]string{"component": "etcd", "tier": "control-plane"},
			Annotations: map[string]string{
				"kubernetes.io/config.source": "file",
				"kubernetes.io/config.mirror": "etcd-" + node.Name,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptrTo(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:    node.Name,
			HostNetwork: true,
			Containers: []corev1.Container{{
				Name:    "etcd",
				Image:   "registry.k8s.io/etcd:3.6.14-0",
				Command: []string{"etcd", "--name=" + node.Name},
				Ports:   []corev1.ContainerPort{{Name: "client", ContainerPort: EtcdPort}},
			}},
		},
	}
}

// ensureNamespace creates the Namespace unless it exists.
func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create Namespace %s: %w", name, err)
	}
	return nil
}

// internalIP is the Node's InternalIP, or NodeIP when it has none yet.
func internalIP(node *corev1.Node) string {
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return NodeIP
}
