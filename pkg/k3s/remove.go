package k3s

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// maxConflicts bounds how often RemoveMember re-reads a Node that changed under its patch
// before it reports InProgress and leaves the next attempt to the next call.
const maxConflicts = 3

// RemoveMember asks K3s to remove member m (hosted on m.NodeName, as a Snapshot gave it), or
// reports how an earlier request went; call it until it reports Removed or Rejected. It acts
// only while the Node's node-name still names m.Name. It records the member name and sets
// remove=true in one patch that fails if the Node changed since it was read, and it never sets
// remove again for a member it recorded: a rejected removal stays rejected. A record of an
// earlier member (the Node rejoined under a new name) does not block removing the new one.
//
// K3s's removed-node-name counts as Removed only with evidence that agrees (docs/k3s-backend.md);
// until then the removal is InProgress saying what is missing.
//
// It fails with ErrInvalidInput for a Node that is not an etcd Node, names another member, or
// carries data K3s would misread (a member named by two Nodes, a node-address that is not an
// IP), and reports Rejected, without asking K3s, for the last member. Checking that the
// removal keeps quorum is the caller's duty.
func (b *Backend) RemoveMember(ctx context.Context, m etcd.Member) (etcd.Removal, error) {
	if m.NodeName == "" || m.Name == "" {
		return etcd.Removal{}, fmt.Errorf("%w: etcd member %s is hosted on no Node; K3s removes members only through the Node that names them", etcd.ErrInvalidInput, m)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("Node", klog.KRef("", m.NodeName), "memberName", m.Name)
	step, cached, err := b.currentStep(ctx, b.cfg.Reader, m)
	if err == nil && (cached == nil || step.result.State == etcd.RemovalRejected) {
		// A cache may not have seen a new Node yet: absence is confirmed live before it
		// counts as removed, and a rejection too, since a cache that has not seen a
		// withdrawal (WithdrawRemoval, on a retry) still shows the stopped attempt's
		// annotations and would reject the new one.
		step, _, err = b.currentStep(ctx, b.cfg.Client, m)
	}
	if err != nil || (!step.request && !step.confirm) {
		return step.result, err
	}
	for range maxConflicts {
		// The cached Node may lag; decide again on the apiserver's Node right before writing.
		var node *corev1.Node
		step, node, err = b.currentStep(ctx, b.cfg.Client, m)
		if err != nil || (!step.request && !step.confirm) {
			return step.result, err
		}
		err = b.write(ctx, node, step)
		if apierrors.IsConflict(err) {
			log.V(4).Info("Node changed while writing the removal, reading it again")
			continue
		}
		if err != nil {
			return etcd.Removal{}, err
		}
		if step.confirm {
			log.Info("K3s's etcd member removal confirmed", "reason", step.result.Reason)
			return step.result, nil
		}
		log.Info("Asked K3s to remove etcd member")
		return etcd.Removal{State: etcd.RemovalInProgress, Member: step.member, Reason: fmt.Sprintf(
			"asked K3s to remove etcd member %s (%s=true on Node %s)", step.member.Name, readNode(node).keys.Remove, node.Name)}, nil
	}
	return etcd.Removal{State: etcd.RemovalInProgress, Member: m,
		Reason: fmt.Sprintf("Node %s kept changing while the removal of etcd member %s was written; it will be written on the next call", m.NodeName, m.Name)}, nil
}

// write sends what a step asks for: the removal request, or the confirmation record.
func (b *Backend) write(ctx context.Context, node *corev1.Node, step removalStep) error {
	if step.confirm {
		return b.patchAnnotations(ctx, node, map[string]any{RemovalConfirmedAnnotation: step.result.Member.Name})
	}
	return b.requestRemoval(ctx, node, step.member.Name)
}

// currentStep reads m's Node (nil when gone) and the etcd Nodes, and decides.
func (b *Backend) currentStep(ctx context.Context, r client.Reader, m etcd.Member) (removalStep, *corev1.Node, error) {
	node, err := b.getNode(ctx, r, m.NodeName)
	if err != nil {
		return removalStep{}, nil, err
	}
	var v clusterView
	if node != nil {
		nodes, err := b.etcdNodes(ctx, r)
		if err != nil {
			return removalStep{}, nil, err
		}
		v = b.viewOf(nodes, node)
	}
	step := decideRemoval(m, node, v, b.cfg.Now())
	return step, node, step.err
}

// viewOf is what the etcd Nodes other than node tell about a removal on node.
func (b *Backend) viewOf(nodes []*corev1.Node, node *corev1.Node) clusterView {
	all := make([]etcdNode, 0, len(nodes))
	for _, n := range nodes {
		all = append(all, readNode(n))
	}
	v := clusterView{rules: rulesOf(all), tick: b.cfg.Tick}
	target := readNode(node)
	for _, e := range all {
		if e.node.Name != node.Name && e.hostsMember() && e.memberName == target.memberName {
			v.twins = append(v.twins, e.node.Name)
		}
	}
	for _, r := range assessNodes(nodes, b.clock()) {
		// Members as Observe reports them: a Node K3s marked NotAMember hosts none, whatever
		// its annotations still say.
		if r.member.NodeName == node.Name || r.member.Name == target.memberName {
			continue
		}
		v.others++
		if r.evidence.Contact != etcd.ContactAnswered || len(r.evidence.Errors) > 0 {
			why := strings.Join(append([]string{r.evidence.Error}, r.evidence.Errors...), "; ")
			v.notHealthy = append(v.notHealthy, fmt.Sprintf("%s on Node %s: %s", r.member.Name, r.member.NodeName, strings.Trim(why, "; ")))
		}
	}
	return v
}

func (b *Backend) clock() clock {
	return clock{now: b.cfg.Now(), staleAfter: b.cfg.StaleAfter(), skew: b.cfg.ClockSkew}
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

// requestRemoval writes, in one merge patch guarded by the Node's resourceVersion, the record
// of the member name and the time, and remove=true. A removed-node-name left from an earlier
// removal (the Node rejoined under a new name) is deleted in the same patch: K3s would
// otherwise delete it together with remove (K3s pkg/etcd/member_controller.go, the rejoin
// check), which would look exactly like a rejection. A confirmation of an earlier member goes
// too.
func (b *Backend) requestRemoval(ctx context.Context, node *corev1.Node, member string) error {
	keys := readNode(node).keys
	annotations := map[string]any{
		RemovingMemberAnnotation:     member,
		RemovalRequestedAtAnnotation: b.cfg.Now().UTC().Format(time.RFC3339),
		keys.Remove:                  "true",
	}
	if removed, ok := node.Annotations[keys.RemovedNodeName]; ok && removed != member {
		annotations[keys.RemovedNodeName] = nil
	}
	if _, ok := node.Annotations[RemovalConfirmedAnnotation]; ok {
		annotations[RemovalConfirmedAnnotation] = nil
	}
	return b.patchAnnotations(ctx, node, annotations)
}

// patchAnnotations merge-patches node's annotations (nil deletes), guarded by its
// resourceVersion; a conflict is returned as is, for the caller to read and decide again.
func (b *Backend) patchAnnotations(ctx context.Context, node *corev1.Node, annotations map[string]any) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.CallTimeout)
	defer cancel()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": node.ResourceVersion, "annotations": annotations,
	}})
	if err != nil {
		return fmt.Errorf("failed to marshal annotation patch for Node %s: %w", node.Name, err)
	}
	if err := b.cfg.Client.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return fmt.Errorf("%w: failed to annotate Node %s: %w", etcd.ErrUnreachable, node.Name, err)
	}
	return nil
}
