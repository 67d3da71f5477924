package kcp

import (
	"context"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	kcpadmission "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/admission"

	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// KubernetesVersion is the version KCP is asked for unless Options.KubernetesVersion says
// otherwise; the kubelet stand-ins report the version KCP is asked for.
const KubernetesVersion = kubelet.DefaultKubeletVersion

// CreateControlPlane creates a TestMachineTemplate and the KubeadmControlPlane the Cluster
// references, with the given replicas, Options.KubernetesVersion and
// Options.KubeadmFeatureGates. No webhook server runs, so KCP's own defaulting and
// create validation are applied here, as its webhook would apply them.
func (e *Env) CreateControlPlane(ctx context.Context, replicas int32) (*controlplanev1.KubeadmControlPlane, error) {
	c := e.Management.Client
	ns, name := e.Cluster.Namespace, e.Cluster.Name
	tmpl := NewMachineTemplate(ns, name)
	if err := c.Create(ctx, tmpl); err != nil {
		return nil, fmt.Errorf("failed to create %s %s/%s: %w", MachineTemplateKind, ns, name, err)
	}
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To(replicas),
			Version:  e.opts.KubernetesVersion,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
				Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infra.Group, Kind: MachineTemplateKind, Name: name,
					},
				},
			},
		},
	}
	if len(e.opts.KubeadmFeatureGates) > 0 {
		kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.FeatureGates = maps.Clone(e.opts.KubeadmFeatureGates)
	}
	if err := admit(ctx, kcp); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, kcp); err != nil {
		return nil, fmt.Errorf("failed to create KubeadmControlPlane %s/%s: %w", ns, name, err)
	}
	return kcp, nil
}

// admit applies KCP's defaulting and create validation webhook logic.
func admit(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane) error {
	w := &kcpadmission.KubeadmControlPlane{}
	if err := w.Default(ctx, kcp); err != nil {
		return fmt.Errorf("failed to default KubeadmControlPlane %s: %w", kcp.Name, err)
	}
	if _, err := w.ValidateCreate(ctx, kcp); err != nil {
		return fmt.Errorf("KubeadmControlPlane %s is invalid: %w", kcp.Name, err)
	}
	return nil
}

// AdmitUpdate applies KCP's defaulting and update validation webhook logic to a change of a
// KubeadmControlPlane, e.g. a scale or a rollout, before the caller writes it.
func AdmitUpdate(ctx context.Context, old, updated *controlplanev1.KubeadmControlPlane) error {
	w := &kcpadmission.KubeadmControlPlane{}
	if err := w.Default(ctx, updated); err != nil {
		return fmt.Errorf("failed to default KubeadmControlPlane %s: %w", updated.Name, err)
	}
	if _, err := w.ValidateUpdate(ctx, old, updated); err != nil {
		return fmt.Errorf("the change of KubeadmControlPlane %s is invalid: %w", updated.Name, err)
	}
	return nil
}
