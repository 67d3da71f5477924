package controlplaneetcd

import (
	"fmt"
	"time"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// snapshotVerdict is what the snapshot gate says about a removal.
type snapshotVerdict string

const (
	// snapshotNotRequired: spec.snapshot is not set; the removal goes on.
	snapshotNotRequired snapshotVerdict = "NotRequired"
	// snapshotFresh: a verified snapshot fresher than spec.snapshot.maxAge precedes the removal.
	snapshotFresh snapshotVerdict = "Fresh"
	// snapshotOverridden: no fresh snapshot, and a person said to go on without one.
	snapshotOverridden snapshotVerdict = "Overridden"
	// snapshotTake: no fresh snapshot; take one this pass, and the removal waits.
	snapshotTake snapshotVerdict = "Take"
	// snapshotWait: no fresh snapshot, and etcd-adapter cannot take one itself; the removal
	// waits for one (K3s and RKE2 take their own).
	snapshotWait snapshotVerdict = "Wait"
	// snapshotRetryLater: no fresh snapshot, and the last attempt failed less than the retry
	// interval ago; the removal waits without a new attempt.
	snapshotRetryLater snapshotVerdict = "RetryLater"
)

// snapshotGateInput is what the snapshot gate decides from.
type snapshotGateInput struct {
	// Spec is spec.snapshot; nil when not opted in.
	Spec *v1alpha1.SnapshotSpec
	// Last is the newest verified snapshot known.
	Last *v1alpha1.SnapshotRecord
	// Overridden is true when the Machine carries RemoveWithoutSnapshotAnnotation=true (never
	// for a ghost, which has no Machine).
	Overridden bool
	// CanTake is true when the backend takes snapshots through etcd-adapter.
	CanTake bool
	// WaitingSince is when the removal started waiting for a snapshot; nil when it did not.
	WaitingSince *time.Time
	// LastFailure is when the last attempt to take one failed; nil when it succeeded.
	LastFailure *time.Time
	// RetryInterval is the least time between a failed attempt and the next.
	RetryInterval time.Duration
	// Now is the time of the pass.
	Now time.Time
}

// snapshotGate is the gate's answer: the verdict, and, for a removal that waits, the
// Progressing reason and why.
type snapshotGate struct {
	Verdict snapshotVerdict
	Reason  string
	Message string
}

// goesOn reports whether the removal may go on.
func (g snapshotGate) goesOn() bool {
	return g.Verdict == snapshotNotRequired || g.Verdict == snapshotFresh || g.Verdict == snapshotOverridden
}

// decideSnapshotGate says whether a member removal may go on as far as spec.snapshot goes. It
// never allows a removal on its own: the quorum projection decides first, and is unchanged.
//
// A snapshot counts when it was taken no longer than maxAge before now and not after now (a
// clock that jumped back must not make an old snapshot look new). A removal that waited longer
// than waitTimeout still waits: a snapshot is what the opt-in promises, and a person who
// decides otherwise annotates the Machine.
func decideSnapshotGate(in snapshotGateInput) snapshotGate {
	if in.Spec == nil {
		return snapshotGate{Verdict: snapshotNotRequired}
	}
	maxAge := in.Spec.MaxAgeOrDefault()
	if in.Last != nil {
		age := in.Now.Sub(in.Last.Time.Time)
		if age >= 0 && age <= maxAge {
			return snapshotGate{Verdict: snapshotFresh, Message: fmt.Sprintf("snapshot %s (revision %d, %d bytes) was taken %s ago", in.Last.Key, in.Last.Revision, in.Last.Size, age.Round(time.Second))}
		}
	}
	why := fmt.Sprintf("no verified etcd snapshot taken within the last %s (spec.snapshot.maxAge)", maxAge)
	if in.Last != nil {
		why = fmt.Sprintf("the newest verified etcd snapshot, %s, was taken at %s, longer ago than %s (spec.snapshot.maxAge)", in.Last.Key, in.Last.Time.UTC().Format(time.RFC3339), maxAge)
	}
	if in.Overridden {
		return snapshotGate{Verdict: snapshotOverridden, Message: fmt.Sprintf("%s, and the Machine has annotation %s=%s", why, v1alpha1.RemoveWithoutSnapshotAnnotation, v1alpha1.AnnotationTrue)}
	}
	verdict, reason := snapshotTake, v1alpha1.ProgressingWaitingForSnapshotReason
	switch {
	case !in.CanTake:
		verdict = snapshotWait
	case in.LastFailure != nil && in.Now.Sub(*in.LastFailure) < in.RetryInterval:
		// Every pass would otherwise stream the whole database again while the bucket is down.
		verdict = snapshotRetryLater
	}
	bound := in.Spec.WaitTimeoutOrDefault()
	if in.WaitingSince != nil && in.Now.Sub(*in.WaitingSince) > bound {
		reason = v1alpha1.ProgressingSnapshotWaitExceededReason
		why = fmt.Sprintf("%s, and the removal has waited longer than %s (spec.snapshot.waitTimeout)", why, bound)
	}
	return snapshotGate{Verdict: verdict, Reason: reason, Message: fmt.Sprintf("%s; to go on without one, annotate the Machine %s=%s", why, v1alpha1.RemoveWithoutSnapshotAnnotation, v1alpha1.AnnotationTrue)}
}
