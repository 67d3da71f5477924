package kcp

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// Objects `kubeadm init` writes into the workload cluster that KubeadmControlPlane reads or
// updates: kubeadm-config (ClusterConfiguration; KCP's initialization signal, updated on
// rollouts), kubelet-config, the CoreDNS ConfigMap and Deployment and the kube-proxy
// DaemonSet (image tags updated by KCP).
const (
	kubeadmConfigMap     = "kubeadm-config"
	kubeletConfigMap     = "kubelet-config"
	coreDNSName          = "coredns"
	kubeProxyName        = "kube-proxy"
	coreDNSImage         = "registry.k8s.io/coredns/coredns:v1.12.1"
	defaultCorefile      = ".:53 {\n    errors\n    health\n    ready\n    kubernetes cluster.local in-addr.arpa ip6.arpa\n    forward . /etc/resolv.conf\n    cache 30\n    loop\n    reload\n    loadbalance\n}\n"
	kubeletConfiguration = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n"
)

// uploadKubeadmObjects creates what `kubeadm init` creates (upload-config and addon phases),
// from the ClusterConfiguration the bootstrap data carries.
func uploadKubeadmObjects(ctx context.Context, c client.Client, clusterConfiguration string) error {
	objs := []client.Object{
		configMap(kubeadmConfigMap, map[string]string{"ClusterConfiguration": clusterConfiguration}),
		configMap(kubeletConfigMap, map[string]string{"kubelet": kubeletConfiguration}),
		configMap(coreDNSName, map[string]string{"Corefile": defaultCorefile}),
		deployment(coreDNSName, coreDNSImage),
		daemonSet(kubeProxyName, "registry.k8s.io/kube-proxy:"+kubelet.DefaultKubeletVersion),
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create %T %s: %w", o, client.ObjectKeyFromObject(o), err)
		}
	}
	return nil
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: name}, Data: data}
}

func podTemplate(name, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}},
	}
}

func deployment(name, image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": name}},
			Template: podTemplate(name, image),
		},
	}
}

func daemonSet(name, image string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": name}},
			Template: podTemplate(name, image),
		},
	}
}
