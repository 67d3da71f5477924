package kubelet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeIP is the Node's only address unless Options.NodeIP says otherwise. Note: the Node has
// no Hostname address on purpose, so the apiserver's default preferred address types pick
// InternalIP without any flag.
const NodeIP = "127.0.0.1"

// readyOverride is a Ready condition set by SetNotReady that heartbeats keep reporting.
type readyOverride struct {
	status  corev1.ConditionStatus
	reason  string
	message string
}

// registerNode creates the Node unless it exists, and writes the kubelet's status.
func (k *Kubelet) registerNode(ctx context.Context) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: k.opts.NodeName},
		Spec:       corev1.NodeSpec{ProviderID: k.opts.ProviderID},
	}
	if err := k.client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to register Node %s: %w", k.opts.NodeName, err)
	}
	return k.heartbeat(ctx)
}

// heartbeat writes the Node's addresses, kubelet endpoint, node info and Ready condition with
// a fresh heartbeat time. A deleted Node is not re-created: in the tests the Node is deleted
// together with its Machine, when a real kubelet would be gone too.
func (k *Kubelet) heartbeat(ctx context.Context) error {
	k.writeMu.Lock()
	defer k.writeMu.Unlock()
	node := &corev1.Node{}
	if err := k.client.Get(ctx, client.ObjectKey{Name: k.opts.NodeName}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	base := node.DeepCopy()
	k.writeNodeStatus(&node.Status)
	if err := k.client.Status().Patch(ctx, node, client.StrategicMergeFrom(base)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("failed to update Node %s status: %w", k.opts.NodeName, err))
	}
	return nil
}

// writeNodeStatus sets everything the kubelet owns in the Node's status.
func (k *Kubelet) writeNodeStatus(status *corev1.NodeStatus) {
	status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: k.opts.NodeIP}}
	status.DaemonEndpoints.KubeletEndpoint.Port = k.Port()
	status.NodeInfo.KubeletVersion = k.opts.KubeletVersion
	status.NodeInfo.OperatingSystem = "linux"
	status.NodeInfo.Architecture = "amd64"
	setReadyCondition(status, k.readyCondition())
}

// readyCondition returns the Ready condition to report now.
func (k *Kubelet) readyCondition() corev1.NodeCondition {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "KubeletReady", Message: "kubelet is posting ready status",
		LastHeartbeatTime: metav1.Now(),
	}
	if o := k.notReady; o != nil {
		c.Status, c.Reason, c.Message = o.status, o.reason, o.message
	}
	return c
}

// setReadyCondition replaces the Ready condition, keeping its transition time unless the
// status changed.
func setReadyCondition(status *corev1.NodeStatus, ready corev1.NodeCondition) {
	for i, c := range status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		ready.LastTransitionTime = c.LastTransitionTime
		if c.Status != ready.Status {
			ready.LastTransitionTime = ready.LastHeartbeatTime
		}
		status.Conditions[i] = ready
		return
	}
	ready.LastTransitionTime = ready.LastHeartbeatTime
	status.Conditions = append(status.Conditions, ready)
}

// SetNotReady makes the stand-in report Ready with status (False or Unknown) from now on, as
// a kubelet whose runtime is down (False) or the node lifecycle controller after missed
// heartbeats (Unknown, reason NodeStatusUnknown) would. It writes the Node at once, after any
// heartbeat on its way, so the Node shows the override when it returns.
func (k *Kubelet) SetNotReady(ctx context.Context, status corev1.ConditionStatus, reason string) error {
	k.mu.Lock()
	k.notReady = &readyOverride{status: status, reason: reason, message: "set by test: " + reason}
	k.mu.Unlock()
	return k.heartbeat(ctx)
}

// SetReady undoes SetNotReady and writes the Node at once, after any heartbeat on its way.
func (k *Kubelet) SetReady(ctx context.Context) error {
	k.mu.Lock()
	k.notReady = nil
	k.mu.Unlock()
	return k.heartbeat(ctx)
}
