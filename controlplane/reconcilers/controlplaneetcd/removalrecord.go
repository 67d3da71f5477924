package controlplaneetcd

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// removalRecord is status.removal, the one member removal a ControlPlaneEtcd follows at a time,
// read through this pass's observation: which Machine and member it is about, and whether it is
// still in flight. The removal flow opens it (openRemoval) right before it asks for a removal and
// closes it (closeRemoval) with the result, or a retry clears it (clearRemoval); persistRemoval
// writes each change.
type removalRecord struct {
	// status is status.removal; nil when no removal is recorded.
	status *v1alpha1.MemberRemovalStatus
	// snapshot is this pass's observation; nil when etcd could not be observed.
	snapshot *etcd.Snapshot
}

// removal returns the pass's removal record.
func (s *scope) removal() removalRecord {
	return removalRecord{status: s.cpe.Status.Removal, snapshot: s.snapshot}
}

// isFor reports whether the record is about the removal of Machine m's member.
func (r removalRecord) isFor(m *clusterv1.Machine) bool {
	return r.status != nil && r.status.MachineName == m.Name
}

// inFlight reports whether the record holds a removal that has not ended, of any Machine.
func (r removalRecord) inFlight() bool {
	return r.status != nil && r.status.Result == v1alpha1.RemovalInProgress && r.status.EndTime == nil
}

// inFlightFor returns the record of a removal asked for m that has not ended and names its
// member, or nil.
func (r removalRecord) inFlightFor(m *clusterv1.Machine) *v1alpha1.MemberRemovalStatus {
	if r.isFor(m) && r.inFlight() && r.namesMember() {
		return r.status
	}
	return nil
}

// stoppedFor reports whether the record holds m's removal that stopped (Rejected, TimedOut) and
// waits for a person.
func (r removalRecord) stoppedFor(m *clusterv1.Machine) bool {
	return r.isFor(m) && stopped(r.status.Result)
}

// namesMember reports whether the record identifies a member: by etcd's member ID, or, for a
// backend whose IDs are not etcd's (K3s records none), by name and Node. Without an observation
// (the hand-back runs then too) the backend's way is not known, so either counts.
func (r removalRecord) namesMember() bool {
	if r.status.MemberID != "" {
		return true
	}
	return (r.snapshot == nil || r.snapshot.SyntheticMemberIDs) && r.status.Member != "" && r.status.NodeName != ""
}

// isOf reports whether the record is about member mb of this pass's observation: by etcd's member
// ID, or, when the backend's IDs are not etcd's (K3s), by member name and Node, as K3s itself
// identifies the member it removes (a rejoin gives the member a new name).
func (r removalRecord) isOf(mb etcd.Member) bool {
	if r.status == nil {
		return false
	}
	if r.snapshot.SyntheticMemberIDs {
		return r.status.Member != "" && r.status.Member == mb.Name && r.status.NodeName == mb.NodeName
	}
	return r.status.MemberID != "" && r.status.MemberID == strconv.FormatUint(mb.ID, 16)
}

// of returns the record of the removal of target for m: as recorded, or a new one starting now.
func (r removalRecord) of(m *clusterv1.Machine, target etcd.Member, now time.Time) v1alpha1.MemberRemovalStatus {
	if r.isFor(m) && r.isOf(target) {
		return *r.status
	}
	// Note: no member ID for a backend that cannot see etcd's (K3s); the name and Node identify
	// the member.
	return v1alpha1.MemberRemovalStatus{Member: target.String(), MemberID: r.snapshot.EtcdMemberID(target.ID), MachineName: m.Name, NodeName: target.NodeName,
		StartTime: metav1.Time{Time: now}, Result: v1alpha1.RemovalInProgress}
}

// openRemoval makes status.removal say the removal of target for m is in progress, with msg. A
// removal of the same member recorded before keeps its start time, so its timeout still counts
// from the first request.
func (s *scope) openRemoval(m *clusterv1.Machine, target etcd.Member, msg string) {
	rec := s.removal().of(m, target, s.now)
	rec.Result, rec.Message = v1alpha1.RemovalInProgress, msg
	s.cpe.Status.Removal = &rec
}

// closeRemoval makes status.removal say that rec ended now with res, and why.
func (s *scope) closeRemoval(rec v1alpha1.MemberRemovalStatus, res v1alpha1.RemovalResult, why string) {
	rec.Result, rec.Message, rec.EndTime = res, why, &metav1.Time{Time: s.now}
	s.cpe.Status.Removal = &rec
}

// clearRemoval takes status.removal away, so that the Machine's next removal starts anew (a retry).
func (s *scope) clearRemoval() {
	s.cpe.Status.Removal = nil
}

// recordedMember returns the member a removal record is about, as the backends take it: the
// record names it as etcd.Member.String does (its name, or its ID for a member that never
// started). A backend whose IDs are not etcd's (synthetic, K3s) identifies the member by its name
// and Node, which the record holds, and gets it with a zero ID.
func recordedMember(rec v1alpha1.MemberRemovalStatus, synthetic bool) (etcd.Member, error) {
	if synthetic {
		if rec.Member == "" || rec.NodeName == "" {
			return etcd.Member{}, fmt.Errorf("the removal record names member %q on Node %q; this backend identifies a member by its name and Node", rec.Member, rec.NodeName)
		}
		return etcd.Member{Name: rec.Member, NodeName: rec.NodeName}, nil
	}
	id, err := strconv.ParseUint(rec.MemberID, 16, 64)
	if err != nil || id == 0 {
		return etcd.Member{}, fmt.Errorf("the removal record names member %q with ID %q, which is not an etcd member ID", rec.Member, rec.MemberID)
	}
	m := etcd.Member{ID: id, Name: rec.Member, NodeName: rec.NodeName}
	if m.Name == (etcd.Member{ID: id}).String() {
		m.Name = ""
	}
	return m, nil
}

// dropSyntheticMemberID takes a member ID etcd did not assign off status.removal. Earlier versions
// recorded K3s removals with the backend's synthetic ID (a hash of the member name); the record
// also holds that name and the Node, which identify the member as well (removalRecord.isOf), so a
// removal in flight across an upgrade continues against the same member and the ID is no longer
// shown.
func dropSyntheticMemberID(s *scope) {
	if rec := s.cpe.Status.Removal; rec != nil && rec.MemberID != "" && s.snapshot != nil && s.snapshot.SyntheticMemberIDs {
		rec.MemberID = ""
	}
}

// persistRemoval writes status.removal now when it differs from what is stored, instead of only
// with the patch at the end of the pass.
//
// Important! This is a write-ahead, kept for crash safety: the removal flow calls it right before
// each step it cannot take back, so that a manager that stops right after the step finds the
// record as it must be to carry on. Before the backend is asked to remove a member (removeMember;
// else a removal is asked with no record of it, and the member's absence would be taken for
// proof), before a hook is released (release; else the Machine goes with its record left
// InProgress), and before the retry annotation is taken off (restartRemoval clears the stopped
// record; the annotation goes in a later pass). The patch at the end of the pass writes the same
// value again, which changes nothing.
func (r *Reconciler) persistRemoval(ctx context.Context, s *scope) error {
	if equality.Semantic.DeepEqual(s.cpe.Status.Removal, s.storedRemoval) {
		return nil
	}
	// Note: a copy is patched, so the pass's object keeps the resourceVersion it was read with
	// and the patch at the end of the pass does not carry a newer one as a precondition.
	latest := s.cpe.DeepCopy()
	before := latest.DeepCopy()
	before.Status.Removal = s.storedRemoval.DeepCopy()
	if err := r.Client.Status().Patch(ctx, latest, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to write status.removal of ControlPlaneEtcd %s: %w", klog.KObj(s.cpe), err)
	}
	r.wrote(latest)
	s.storedRemoval = s.cpe.Status.Removal.DeepCopy()
	return nil
}
