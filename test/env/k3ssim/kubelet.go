package k3ssim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kubelet is the node agent of a simulated server. When the server's etcd member is removed,
// its apiserver loses its only etcd and the kubelet its API path, so the Node goes NotReady;
// on restart it is Ready again.
type Kubelet interface {
	// Start makes (and keeps) Node node Ready.
	Start(ctx context.Context, node string) error
	// Stop stops reporting for Node node, which must end up NotReady.
	Stop(ctx context.Context, node string) error
}

// readyWriter is the default Kubelet: it writes the Ready condition once, which stays as
// written because envtest runs no node lifecycle controller.
type readyWriter struct {
	client client.Client
}

var _ Kubelet = &readyWriter{}

// Start writes Ready=True.
func (r *readyWriter) Start(ctx context.Context, node string) error {
	return r.write(ctx, node, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
}

// Stop writes Ready=Unknown, as the node lifecycle controller does for a silent kubelet.
func (r *readyWriter) Stop(ctx context.Context, node string) error {
	return r.write(ctx, node, corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.")
}

func (r *readyWriter) write(ctx context.Context, node string, status corev1.ConditionStatus, reason, message string) error {
	now := metav1.NewTime(time.Now())
	cond := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: status, Reason: reason, Message: message,
		LastHeartbeatTime: now, LastTransitionTime: now,
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		return fmt.Errorf("failed to marshal Ready patch: %w", err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := r.client.Status().Patch(ctx, n, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("failed to set Node %s Ready=%s: %w", node, status, err)
	}
	return nil
}
