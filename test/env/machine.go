package env

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
)

// MachineInput describes a control-plane Machine to create in the management cluster.
type MachineInput struct {
	// Cluster the Machine belongs to (namespace and name are used).
	Cluster *clusterv1.Cluster

	// Name of the Machine and of its TestMachine.
	Name string

	// ProviderID must equal the workload Node's spec.providerID; Cluster API's Machine controller
	// then sets the Machine's status.nodeRef to that Node.
	ProviderID string

	// Annotations are added to the Machine at creation, for example deletion hooks.
	Annotations map[string]string
}

// CreateControlPlaneMachine creates a TestMachine reporting in.ProviderID and a control-plane
// Machine that references it. The Machine's bootstrap data Secret name is set directly, so no
// bootstrap provider is involved (the Secret itself is never read).
func CreateControlPlaneMachine(ctx context.Context, c client.Client, in MachineInput) (*clusterv1.Machine, error) {
	ns := in.Cluster.Namespace
	if err := c.Create(ctx, infra.NewMachine(ns, in.Name, in.ProviderID)); err != nil {
		return nil, fmt.Errorf("failed to create %s %s/%s: %w", infra.MachineKind, ns, in.Name, err)
	}
	m := controlPlaneMachine(in)
	if err := c.Create(ctx, m); err != nil {
		return nil, fmt.Errorf("failed to create Machine %s/%s: %w", ns, in.Name, err)
	}
	return m, nil
}

// ControlPlaneMachine returns the control-plane Machine CreateControlPlaneMachine creates, not
// created (for a dry-run admission, say).
func ControlPlaneMachine(in MachineInput) *clusterv1.Machine { return controlPlaneMachine(in) }

func controlPlaneMachine(in MachineInput) *clusterv1.Machine {
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: in.Cluster.Namespace,
			Name:      in.Name,
			Labels: map[string]string{
				clusterv1.ClusterNameLabel:         in.Cluster.Name,
				clusterv1.MachineControlPlaneLabel: "",
			},
			Annotations: in.Annotations,
		},
		Spec: clusterv1.MachineSpec{
			ClusterName: in.Cluster.Name,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: new(in.Name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infra.Group,
				Kind:     infra.MachineKind,
				Name:     in.Name,
			},
		},
	}
}
