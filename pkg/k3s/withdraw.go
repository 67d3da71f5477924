package k3s

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

var _ etcd.RemovalWithdrawer = &Backend{}

// WithdrawRemoval withdraws this backend's request to remove member m that K3s has not carried
// out: it deletes remove and the record in one patch guarded by the Node's resourceVersion.
// K3s keeps remove=true as a standing order while etcd refuses the removal ("unhealthy
// cluster") and removes the member whenever the cluster recovers, even after the caller gave
// up; deleting remove is the only way to withdraw it (K3s pkg/etcd/member_controller.go).
//
// It is a no-op when the Node is gone, carries no request of this backend for m, or K3s
// already claimed the removal (it cannot be undone).
func (b *Backend) WithdrawRemoval(ctx context.Context, m etcd.Member) error {
	if m.NodeName == "" {
		return nil
	}
	for range maxConflicts {
		node, err := b.getNode(ctx, b.cfg.Client, m.NodeName)
		if err != nil || !withdrawable(node, m) {
			return err
		}
		keys := readNode(node).keys
		err = b.patchAnnotations(ctx, node, map[string]any{
			keys.Remove: nil, v1alpha1.K3sRemovingMemberAnnotation: nil, v1alpha1.K3sRemovalRequestedAtAnnotation: nil,
		})
		if apierrors.IsConflict(err) {
			continue
		}
		if err == nil {
			ctrl.LoggerFrom(ctx).Info("Withdrew etcd member removal request", "Node", klog.KObj(node), "memberName", m.Name)
		}
		return err
	}
	return fmt.Errorf("%w: Node %s kept changing while the removal of etcd member %s was withdrawn", etcd.ErrUnreachable, m.NodeName, m.Name)
}

// withdrawable reports whether n carries this backend's pending request to remove m.
func withdrawable(n *corev1.Node, m etcd.Member) bool {
	if n == nil || n.Annotations[v1alpha1.K3sRemovingMemberAnnotation] != m.Name {
		return false
	}
	k := readNode(n).keys
	return n.Annotations[k.RemovedNodeName] != m.Name
}
