package k3ssim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// matchMember returns the member a Node stands for. From 1.29.3 on K3s matches
// member.Name == node-name annotation; before, a member whose name starts with `<node>-`
// (k3s pkg/etcd/etcd.go).
func matchMember(p Profile, node *corev1.Node, members []member) (member, bool) {
	for _, m := range members {
		if m.Name == "" {
			// A learner that has not started yet has no name and matches nothing.
			continue
		}
		if p.ExactMemberMatch && m.Name == node.Annotations[p.Keys.NodeName] {
			return m, true
		}
		if !p.ExactMemberMatch && strings.HasPrefix(m.Name, node.Name+"-") {
			return m, true
		}
	}
	return member{}, false
}

// desiredVoterCondition returns the EtcdIsVoter condition K3s writes for a Node, as k3s
// pkg/etcd/etcd.go writes it, and false when that K3s version writes nothing for it. found says whether
// a member matched; healthErr is the member's health (only used where Unhealthy exists).
func desiredVoterCondition(p Profile, m member, found bool, healthErr error) (corev1.NodeCondition, bool) {
	if !p.HasEtcdIsVoter {
		return corev1.NodeCondition{}, false
	}
	cond := corev1.NodeCondition{Type: EtcdIsVoterCondition, Status: corev1.ConditionFalse}
	switch {
	case !found && !p.HasHealthReasons:
		// Before NotAMember existed, an unmatched Node was simply skipped.
		return corev1.NodeCondition{}, false
	case !found:
		cond.Reason, cond.Message = ReasonNotAMember, MessageNotAMember
	case p.HasHealthReasons && healthErr != nil:
		// Unhealthy wins over learner/voter.
		cond.Reason, cond.Message = ReasonUnhealthy, healthErr.Error()
	case m.IsLearner:
		cond.Reason, cond.Message = ReasonMemberIsLearner, MessageMemberIsLearner
	default:
		cond.Status, cond.Reason, cond.Message = corev1.ConditionTrue, ReasonMemberNotLearner, MessageMemberNotLearner
	}
	return cond, true
}

// conditionToWrite applies K3s's heartbeat rule: an unchanged condition is re-written only
// when its lastHeartbeatTime is older than heartbeat (5 min in K3s). It returns the condition
// with its timestamps set, and whether it must be written.
func conditionToWrite(existing []corev1.NodeCondition, desired corev1.NodeCondition, now time.Time, heartbeat time.Duration) (corev1.NodeCondition, bool) {
	desired.LastHeartbeatTime = metav1.NewTime(now)
	desired.LastTransitionTime = metav1.NewTime(now)
	for _, c := range existing {
		if c.Type != desired.Type {
			continue
		}
		unchanged := c.Status == desired.Status && c.Reason == desired.Reason && c.Message == desired.Message
		if unchanged && now.Sub(c.LastHeartbeatTime.Time) < heartbeat {
			return corev1.NodeCondition{}, false
		}
		if c.Status == desired.Status {
			desired.LastTransitionTime = c.LastTransitionTime
		}
	}
	return desired, true
}

// unhealthyError returns K3s's health verdict for a member: Status(member.ClientURLs[0]) from
// the leader; an error or a non-empty Errors list means unhealthy.
func (s *Simulator) unhealthyError(ctx context.Context, m member) error {
	if len(m.ClientURLs) == 0 {
		return errors.New("failed to check etcd member status: member has no client URL")
	}
	resp, err := s.etcd.status(ctx, m.ClientURLs[0])
	if err != nil {
		return fmt.Errorf("failed to check etcd member status: %w", err)
	}
	if len(resp.Errors) > 0 {
		return fmt.Errorf("etcd member has status errors: %s", strings.Join(resp.Errors, ", "))
	}
	return nil
}

// memberHealth checks every named member in parallel, so that one stopped member costs one
// call timeout per tick, not one per member.
func (s *Simulator) memberHealth(ctx context.Context, members []member) map[uint64]error {
	health := make(map[uint64]error, len(members))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range members {
		if m.Name == "" {
			continue
		}
		wg.Go(func() {
			err := s.unhealthyError(ctx, m)
			mu.Lock()
			health[m.ID] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return health
}

// writeVoterConditions is the leader's EtcdIsVoter pass over the etcd-labelled Nodes.
//
// p is the profile of the leader's K3s: only its rules apply, also to Nodes whose servers run
// another version (k3s pkg/etcd/etcd.go runs the pass on the leader only).
func (s *Simulator) writeVoterConditions(ctx context.Context, members []member, p Profile) error {
	if !p.HasEtcdIsVoter {
		return nil
	}
	nodes := &corev1.NodeList{}
	if err := s.client.List(ctx, nodes, s.etcdNodeSelector()); err != nil {
		return fmt.Errorf("failed to list etcd Nodes: %w", err)
	}
	var health map[uint64]error
	if p.HasHealthReasons {
		health = s.memberHealth(ctx, members)
	}
	var errs []error
	for i := range nodes.Items {
		node := &nodes.Items[i]
		if s.conditionHidden(node.Name) {
			continue
		}
		m, found := matchMember(p, node, members)
		desired, ok := desiredVoterCondition(p, m, found, health[m.ID])
		if !ok {
			continue
		}
		errs = append(errs, s.patchCondition(ctx, node, desired))
	}
	return errors.Join(errs...)
}

// patchCondition writes one condition by a strategic-merge patch of status.conditions, as
// K3s does, when the heartbeat rule asks for it.
func (s *Simulator) patchCondition(ctx context.Context, node *corev1.Node, desired corev1.NodeCondition) error {
	cond, write := conditionToWrite(node.Status.Conditions, desired, time.Now(), s.opts.HeartbeatInterval)
	if !write {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		return fmt.Errorf("failed to marshal %s condition patch: %w", cond.Type, err)
	}
	if err := s.client.Status().Patch(ctx, node, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("failed to patch %s condition of Node %s: %w", cond.Type, node.Name, err)
	}
	return nil
}

// etcdNodeSelector selects the etcd-labelled Nodes of this cluster.
func (s *Simulator) etcdNodeSelector() client.MatchingLabels {
	selector := client.MatchingLabels{EtcdRoleLabel: "true"}
	for k, v := range s.opts.ClusterLabels {
		selector[k] = v
	}
	return selector
}
