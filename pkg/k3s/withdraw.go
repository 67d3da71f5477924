package k3s

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

var _ etcd.RemovalWithdrawer = &Backend{}

// WithdrawRemoval withdraws this backend's request to remove member m that K3s has not carried
// out: it deletes remove and the record in one patch guarded by the Node's resourceVersion.
// K3s keeps remove=true as a standing order while etcd refuses the removal ("unhealthy
// cluster") and removes the member whenever the cluster recovers, even after the caller gave
// up; deleting remove is the only way to withdraw it (K3s pkg/etcd/member_controller.go).
//
// It also deletes a removed-node-name claim for m that m's server disproved by writing node-name
// back (K3s matched no member at the Node's node-address and claimed the removal anyway), and
// remove with it. While removed-node-name equals node-name K3s's member controller does nothing
// for the Node, so a new request would never be carried out, and K3s's finalizer would let the
// Node go without removing its member; remove goes too, or K3s would act on it the moment the
// claim is gone, outside any quorum check.
//
// It is a no-op when the Node is gone, carries no request of this backend for m and no
// disproved claim, or K3s claimed the removal and m's server did not write node-name back (it
// may have happened, and cannot be undone).
func (b *Backend) WithdrawRemoval(ctx context.Context, m etcd.Member) error {
	if m.NodeName == "" || m.Name == "" {
		return nil
	}
	for range maxConflicts {
		node, err := b.getNode(ctx, b.cfg.Client, m.NodeName)
		if err != nil {
			return err
		}
		annotations := withdrawal(node, m)
		if annotations == nil {
			return nil
		}
		err = b.patchAnnotations(ctx, node, annotations)
		if apierrors.IsConflict(err) {
			continue
		}
		if err == nil {
			_, disproved := annotations[readNode(node).keys.RemovedNodeName]
			ctrl.LoggerFrom(ctx).Info("Withdrew etcd member removal request", "Node", klog.KObj(node), "memberName", m.Name, "disprovedClaim", disproved)
		}
		return err
	}
	return fmt.Errorf("%w: Node %s kept changing while the removal of etcd member %s was withdrawn", etcd.ErrUnreachable, m.NodeName, m.Name)
}

// withdrawal returns the annotations to delete (nil values, for a merge patch) to withdraw the
// removal of m on Node n, or nil when there is nothing to withdraw: this backend's pending
// request (remove and the record), and a removed-node-name claim for m that m's server
// disproved by writing node-name back (with remove, whoever set it). A claim whose member no
// Node names any more may be a real removal and is kept.
func withdrawal(n *corev1.Node, m etcd.Member) map[string]any {
	if n == nil {
		return nil
	}
	k := readNode(n).keys
	out := map[string]any{}
	claimed := n.Annotations[k.RemovedNodeName] == m.Name
	disproved := claimed && n.Annotations[k.NodeName] == m.Name
	if disproved {
		out[k.RemovedNodeName], out[k.Remove] = nil, nil
	}
	if n.Annotations[RemovingMemberAnnotation] == m.Name && (!claimed || disproved) {
		out[k.Remove], out[RemovingMemberAnnotation], out[RemovalRequestedAtAnnotation] = nil, nil, nil
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
