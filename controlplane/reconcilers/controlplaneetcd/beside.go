package controlplaneetcd

import (
	"context"
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// besideOtherRemoval decides, right before m's removal of target is asked, whether status.removal
// holds another Machine's removal that m must wait for. It reports wait (having said why) or
// lets the removal go, in which case m's record replaces the other one.
//
// One removal at a time: status.removal follows one, and the projection in removeMember assumes
// no other membership change. Two records of another Machine are kept:
//   - a stopped removal (Rejected, TimedOut) of a Machine still held: it waits for a person, and
//     replacing it would restart that removal without one (and, for K3s, lose the only proof
//     its hook may be released on);
//   - a removal in progress, unless it is parked (parkedRemoval), which m's removal may go
//     beside when safe in every outcome (projectBesideParked).
func (r *Reconciler) besideOtherRemoval(ctx context.Context, s *scope, m *clusterv1.Machine, target etcd.Member) (outcome, bool) {
	record := s.removal()
	other := record.status
	if other == nil || record.isFor(m) {
		return outcome{}, false
	}
	if stopped(other.Result) && s.recordStillNeeded(other) {
		return waiting(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf(
			"Machine %s waits: status.removal keeps the stopped removal of etcd member %s of Machine %s until a person retries or releases it", m.Name, other.Member, other.MachineName)), true
	}
	if !record.inFlight() {
		return outcome{}, false
	}
	parked, ok := s.parkedRemoval(record)
	if !ok {
		return waiting(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Machine %s waits for the removal of etcd member %s of Machine %s to finish", m.Name, other.Member, other.MachineName)), true
	}
	if v := projectBesideParked(etcd.AssessMembers(s.snapshot, s.now), parked, target); !v.Allowed {
		return r.blocked(s, m, fmt.Sprintf("Removing etcd member %s of Machine %s is not safe now: the removal of etcd member %s of Machine %s was asked and etcd may still apply it (%s): %s",
			target, m.Name, other.Member, other.MachineName, v.Reason, v.Message)), true
	}
	ctrl.LoggerFrom(ctx).Info("Removing a member beside a parked removal: safe whether or not etcd applies the parked one",
		"parkedMachine", other.MachineName, "parkedMember", other.Member)
	return outcome{}, false
}

// parkedRemoval returns the member of record, a removal in progress, when it is parked: the member is
// still in this pass's observation and the quorum projection refuses its removal now, so no pass
// asks for it again until that changes. Not for a backend whose member IDs are not etcd's (K3s):
// there the record is what the release is proven by (confirmRemoval), so it is never replaced
// while in progress.
func (s *scope) parkedRemoval(record removalRecord) (etcd.Member, bool) {
	if s.snapshot.SyntheticMemberIDs {
		return etcd.Member{}, false
	}
	for _, mb := range s.snapshot.Members {
		if record.isOf(mb) {
			return mb, !etcd.CanRemoveMember(s.snapshot, s.now, mb).Allowed
		}
	}
	return etcd.Member{}, false
}

// recordStillNeeded reports whether rec must stay in status.removal: a removal in progress (it is
// confirmed through it), or a stopped removal of a Machine still held (it waits for a person).
func (s *scope) recordStillNeeded(rec *v1alpha1.MemberRemovalStatus) bool {
	if rec.Result == v1alpha1.RemovalInProgress && rec.EndTime == nil {
		return true
	}
	if !stopped(rec.Result) {
		return false
	}
	for _, m := range s.memberMachines() {
		if m.Name == rec.MachineName {
			return !m.DeletionTimestamp.IsZero() && s.holdsMachine(m)
		}
	}
	return false
}

// projectBesideParked decides whether target may be removed while the removal of parked was asked
// and may or may not be applied: a MemberRemove that went out may have been refused, may be
// applied, or may sit in the Raft log of a leader and be applied later. target's removal must be
// safe in each outcome:
//   - parked never applied: the projection of target alone, which removeMember checked;
//   - target applied, then parked: both removed in that order (etcd.ProjectRemovals);
//   - parked applied, then target: both removed in that order, or target is not healthy. Removing
//     a member that is not healthy takes no healthy voter away, so it leaves the cluster at least
//     as able to commit as it was; when parked's removal alone already lost quorum (the reason
//     it was refused), etcd cannot commit target's removal then, and nothing gets worse.
//
// Example: 3 voters A, B, C; A's removal went out, then C died, so A's removal is refused now.
// Removing C: C then A leaves B (1 of 1); A then C is quorum lost already by A, and C is not
// healthy. Allowed: the Machine deleted to replace C does not wait for A's removal to time out.
func projectBesideParked(members []etcd.MemberHealth, parked, target etcd.Member) etcd.QuorumVerdict {
	if v := etcd.ProjectRemovals(members, []etcd.Member{target, parked}); !v.Allowed {
		return v
	}
	v := etcd.ProjectRemovals(members, []etcd.Member{parked, target})
	if v.Allowed {
		return v
	}
	for _, mh := range members {
		if mh.Member.ID == target.ID && mh.Health != etcd.Healthy {
			return etcd.QuorumVerdict{Allowed: true, Reason: v1alpha1.MemberRemovalSafeReason, Message: fmt.Sprintf(
				"etcd member %s is not healthy: removing it takes no healthy voter, whether or not etcd applies the removal of %s", target, parked)}
		}
	}
	return v
}
