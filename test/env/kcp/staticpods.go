package kcp

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// Control-plane components whose static Pods KubeadmControlPlane inspects on every Node
// (kube-system/<component>-<node>, labels tier=control-plane and component=<component>).
const (
	ComponentAPIServer         = "kube-apiserver"
	ComponentControllerManager = "kube-controller-manager"
	ComponentScheduler         = "kube-scheduler"
	ComponentEtcd              = "etcd"
)

// apiServerPort is the port of kubeadm's kube-apiserver Pod; KCP dials it through a
// port-forward to read the serving certificate's expiry.
const apiServerPort = 6443

// nonEtcdComponents are the static Pods created here; the etcd Pod comes from the kubelet
// package, shared with the other workload flavours.
var nonEtcdComponents = []string{ComponentAPIServer, ComponentControllerManager, ComponentScheduler}

// createStaticPods creates the mirror Pods of kubeadm's four control-plane static Pods on node.
// The Node's kubelet stand-in reports them Running and Ready.
func createStaticPods(ctx context.Context, c client.Client, nodeName string) error {
	if _, err := kubelet.CreateEtcdPod(ctx, c, nodeName); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return fmt.Errorf("failed to get Node %s for its static Pods: %w", nodeName, err)
	}
	for _, component := range nonEtcdComponents {
		pod := mirrorPod(node, component)
		if err := c.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create Pod %s: %w", client.ObjectKeyFromObject(pod), err)
		}
	}
	return nil
}

// mirrorPod returns the mirror Pod of kubeadm's static Pod of component on node.
func mirrorPod(node *corev1.Node, component string) *corev1.Pod {
	name := staticPodName(component, node.Name)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: metav1.NamespaceSystem,
			Name:      name,
			Labels:    map[string]string{"component": component, "tier": "control-plane"},
			Annotations: map[string]string{
				"kubernetes.io/config.source": "file",
				"kubernetes.io/config.mirror": name,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:    node.Name,
			HostNetwork: true,
			Containers: []corev1.Container{{
				Name:  component,
				Image: "registry.k8s.io/" + component + ":" + kubelet.DefaultKubeletVersion,
				Ports: componentPorts(component),
			}},
		},
	}
}

func componentPorts(component string) []corev1.ContainerPort {
	if component == ComponentAPIServer {
		return []corev1.ContainerPort{{Name: "https", ContainerPort: apiServerPort}}
	}
	return nil
}

// staticPodName is kubeadm's mirror Pod name: <component>-<node>.
func staticPodName(component, nodeName string) string { return component + "-" + nodeName }

// deleteStaticPods deletes the node's mirror Pods. Note: no garbage collector runs in the test
// apiserver, so Pods owned by a deleted Node would stay.
func deleteStaticPods(ctx context.Context, c client.Client, nodeName string) error {
	for _, component := range append([]string{ComponentEtcd}, nonEtcdComponents...) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: staticPodName(component, nodeName)}}
		if err := c.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete Pod %s: %w", client.ObjectKeyFromObject(pod), err)
		}
	}
	return nil
}
