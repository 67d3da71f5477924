package kcp

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// controlPlaneKubeletLocalMode is kubeadm's feature gate (KEP-4471) that decides the join order.
const controlPlaneKubeletLocalMode = "ControlPlaneKubeletLocalMode"

// Versions of kubeadm's ControlPlaneKubeletLocalMode: alpha (off) from v1.31, beta (on) from
// v1.33, GA from v1.36, where KubeadmControlPlane stops setting it (cluster-api v1.14
// controlplane/kubeadm/pkg/desiredstate/desired_state.go DefaultFeatureGates).
var (
	localModeAlpha = version.MustParseSemantic("v1.31.0")
	localModeBeta  = version.MustParseSemantic("v1.33.0")
	localModeGA    = version.MustParseSemantic("v1.36.0")
)

// joinOrder returns the order in which `kubeadm join --control-plane` registers the Node and
// adds the etcd learner on this cluster. kubeadm join reads the feature gates from the
// ClusterConfiguration in kube-system/kubeadm-config (uploaded by `kubeadm init`), not from its
// own configuration file.
func (w *workloadCluster) joinOrder(ctx context.Context) (workload.JoinOrder, error) {
	cm := &corev1.ConfigMap{}
	if err := w.api.Client.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: kubeadmConfigMap}, cm); err != nil {
		return 0, fmt.Errorf("failed to read the ClusterConfiguration kubeadm join uses: %w", err)
	}
	return joinOrderOf(cm.Data["ClusterConfiguration"])
}

// joinOrderOf returns the join order a ClusterConfiguration gives: etcd first when
// ControlPlaneKubeletLocalMode is on (its default from v1.33, always from v1.36), Node first
// otherwise (k8s.io/kubernetes cmd/kubeadm/app/cmd/phases/join/kubelet.go; see
// workload.JoinNodeFirst and workload.JoinEtcdFirst).
func joinOrderOf(clusterConfiguration string) (workload.JoinOrder, error) {
	cfg := struct {
		KubernetesVersion string          `json:"kubernetesVersion"`
		FeatureGates      map[string]bool `json:"featureGates"`
	}{}
	if err := yaml.Unmarshal([]byte(clusterConfiguration), &cfg); err != nil {
		return 0, fmt.Errorf("failed to parse the ClusterConfiguration: %w", err)
	}
	v, err := version.ParseSemantic(cfg.KubernetesVersion)
	if err != nil {
		return 0, fmt.Errorf("failed to parse kubernetesVersion %q of the ClusterConfiguration: %w", cfg.KubernetesVersion, err)
	}
	on, set := cfg.FeatureGates[controlPlaneKubeletLocalMode]
	switch {
	case v.AtLeast(localModeGA):
		on = true
	case v.LessThan(localModeAlpha):
		on = false
	case !set:
		on = v.AtLeast(localModeBeta)
	}
	if on {
		return workload.JoinEtcdFirst, nil
	}
	return workload.JoinNodeFirst, nil
}
