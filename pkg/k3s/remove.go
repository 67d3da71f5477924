package k3s

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// maxConflicts bounds how often RemoveMember re-reads a Node that changed under its patch
// before it reports InProgress and leaves the next attempt to the next call.
const maxConflicts = 3

// RemoveMember asks K3s to remove member m (hosted on m.NodeName), or reports how an earlier
// request went; call it until it reports Removed or Rejected. It records the member name and
// sets remove=true in one patch that fails if the Node changed since it was read, and it never
// sets remove again on a Node that carries the record: a rejected removal stays rejected, and a
// Node that rejoined under a new member name keeps its new member.
//
// It fails with ErrInvalidInput for a Node that is not an etcd Node or has no member name
// annotation, and reports Rejected, without asking K3s, for the Node of the last member.
// Checking that the removal keeps quorum is the caller's duty.
func (b *Backend) RemoveMember(ctx context.Context, m etcd.Member) (etcd.Removal, error) {
	nodeName := m.NodeName
	if nodeName == "" {
		return etcd.Removal{}, fmt.Errorf("%w: etcd member %s is hosted on no Node; K3s removes members only through their Node", etcd.ErrInvalidInput, m)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("Node", klog.KRef("", nodeName))
	step, cached, err := b.currentStep(ctx, b.cfg.Reader, nodeName)
	if err == nil && cached == nil {
		// A cache may not have seen a new Node yet: absence is confirmed live before it
		// counts as removed.
		step, _, err = b.currentStep(ctx, b.cfg.Client, nodeName)
	}
	if err != nil || !step.request {
		return step.result, err
	}
	for range maxConflicts {
		// The cached Node may lag; decide again on the apiserver's Node right before writing.
		var node *corev1.Node
		step, node, err = b.currentStep(ctx, b.cfg.Client, nodeName)
		if err != nil || !step.request {
			return step.result, err
		}
		patched, err := b.requestRemoval(ctx, node, step.member.Name)
		if apierrors.IsConflict(err) {
			log.V(4).Info("Node changed while requesting etcd member removal, reading it again")
			continue
		}
		if err != nil {
			return etcd.Removal{}, err
		}
		log.Info("Asked K3s to remove etcd member", "memberName", step.member.Name)
		next := decideRemoval(nodeName, patched, 1, b.cfg.Now())
		return next.result, next.err
	}
	return etcd.Removal{State: etcd.RemovalInProgress, Member: step.member,
		Reason: fmt.Sprintf("Node %s kept changing while the removal of etcd member %s was requested; it will be requested on the next call", nodeName, step.member.Name)}, nil
}

// currentStep reads the Node (nil when gone) and the other etcd Nodes, and decides.
func (b *Backend) currentStep(ctx context.Context, r client.Reader, nodeName string) (removalStep, *corev1.Node, error) {
	node, err := b.getNode(ctx, r, nodeName)
	if err != nil {
		return removalStep{}, nil, err
	}
	others := 0
	if node != nil && node.Annotations[v1alpha1.K3sRemovingMemberAnnotation] == "" {
		if others, err = b.otherMembers(ctx, r, nodeName); err != nil {
			return removalStep{}, nil, err
		}
	}
	step := decideRemoval(nodeName, node, others, b.cfg.Now())
	return step, node, step.err
}

// getNode reads a Node; nil when it does not exist.
func (b *Backend) getNode(ctx context.Context, r client.Reader, name string) (*corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.CallTimeout)
	defer cancel()
	n := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, readError(err, "failed to get Node "+name)
	}
	return n, nil
}

// otherMembers counts the etcd Nodes other than nodeName that host a member.
func (b *Backend) otherMembers(ctx context.Context, r client.Reader, nodeName string) (int, error) {
	nodes, err := b.etcdNodes(ctx, r)
	if err != nil {
		return 0, err
	}
	count := 0
	for _, n := range nodes {
		if n.Name != nodeName && readNode(n).hostsMember() {
			count++
		}
	}
	return count, nil
}

// requestRemoval writes, in one merge patch guarded by the Node's resourceVersion, the record
// of the member name and the time, and remove=true. A removed-node-name left from an earlier
// removal (the Node rejoined under a new name) is deleted in the same patch: K3s would
// otherwise delete it together with remove (contract, removal step 2), which would look
// exactly like a rejection.
func (b *Backend) requestRemoval(ctx context.Context, node *corev1.Node, member string) (*corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.CallTimeout)
	defer cancel()
	nodeName := node.Name
	keys := readNode(node).keys
	annotations := map[string]any{
		v1alpha1.K3sRemovingMemberAnnotation:     member,
		v1alpha1.K3sRemovalRequestedAtAnnotation: b.cfg.Now().UTC().Format(time.RFC3339),
		keys.Remove:                              "true",
	}
	if removed, ok := node.Annotations[keys.RemovedNodeName]; ok && removed != member {
		annotations[keys.RemovedNodeName] = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": node.ResourceVersion, "annotations": annotations,
	}})
	if err != nil {
		return nil, fmt.Errorf("failed to marshal removal patch for Node %s: %w", nodeName, err)
	}
	if err := b.cfg.Client.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsConflict(err) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: failed to annotate Node %s with %s=true: %w", etcd.ErrUnreachable, nodeName, keys.Remove, err)
	}
	return node, nil
}
