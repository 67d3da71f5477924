package k3ssim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// ensureFinalizer adds the member controller's finalizer. Like wrangler's OnRemove handler it
// goes on every Node the controller sees, not only etcd Nodes; non-etcd Nodes are let go at
// once on deletion. It reports whether it added the finalizer.
func (s *Simulator) ensureFinalizer(ctx context.Context, node *corev1.Node) (bool, error) {
	if controllerutil.ContainsFinalizer(node, MemberControllerFinalizer) {
		return false, nil
	}
	orig := node.DeepCopy()
	controllerutil.AddFinalizer(node, MemberControllerFinalizer)
	if err := s.client.Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("failed to add finalizer to Node %s: %w", node.Name, err)
	}
	return true, nil
}

// reconcileDelete holds a deleted etcd Node until its member is removed, with the same lookup
// as the removal (k3s pkg/etcd/member_controller.go, its OnRemove handler). A Node that carries removed-node-name is let go
// at once; a missing node-name/node-address or a failed removal is requeued.
func (s *Simulator) reconcileDelete(ctx context.Context, node *corev1.Node) error {
	if !controllerutil.ContainsFinalizer(node, MemberControllerFinalizer) {
		return nil
	}
	if err := s.removeMemberOfDeletedNode(ctx, node); err != nil {
		return err
	}
	orig := node.DeepCopy()
	controllerutil.RemoveFinalizer(node, MemberControllerFinalizer)
	if err := s.client.Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("failed to remove finalizer from Node %s: %w", node.Name, err)
	}
	return nil
}

// removeMemberOfDeletedNode removes the member of a deleted etcd Node, unless K3s removed it
// already by annotation.
func (s *Simulator) removeMemberOfDeletedNode(ctx context.Context, node *corev1.Node) error {
	if _, ok := node.Labels[EtcdRoleLabel]; !ok {
		return nil
	}
	if node.Annotations[s.profile.Keys.RemovedNodeName] != "" {
		return nil
	}
	name, address, err := s.nameAndAddress(node)
	if err != nil {
		return err
	}
	return s.removePeer(ctx, name, address)
}
