package env

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateNode creates a workload Node with spec.providerID and a Ready condition, as a kubelet
// would register it. Nothing keeps the Node's status fresh unless a kubelet stand-in runs, which
// is fine as long as no one checks heartbeats.
func CreateNode(ctx context.Context, c client.Client, name, providerID string) (*corev1.Node, error) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
	}
	if err := c.Create(ctx, node); err != nil {
		return nil, fmt.Errorf("failed to create Node %s: %w", name, err)
	}
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{{
		Type:               corev1.NodeReady,
		Status:             corev1.ConditionTrue,
		Reason:             "KubeletReady",
		LastHeartbeatTime:  now,
		LastTransitionTime: now,
	}}
	if err := c.Status().Update(ctx, node); err != nil {
		return nil, fmt.Errorf("failed to mark Node %s Ready: %w", name, err)
	}
	return node, nil
}
