package controlplaneetcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// maintenanceStepInterval brings the next maintenance step (the next member) on a fresh pass
// soon after one was done.
const maintenanceStepInterval = time.Second

// maintainer is what the maintenance phase needs of a backend besides etcd.Cluster's Observe and
// MoveLeader. The kubeadm and external backends implement it; K3s and RKE2 give no access to
// etcd's maintenance API.
type maintainer interface {
	// Defragment defragments member m once safe accepts the observation made right before.
	Defragment(ctx context.Context, m etcd.Member, safe func(*etcd.Snapshot) error) (etcd.Defragmentation, error)
	// DisarmAlarms disarms the alarms once safe accepts the observation made right before.
	DisarmAlarms(ctx context.Context, alarms []etcd.ActiveAlarm, safe func(*etcd.Snapshot) error) error
}

// errStepChanged is what the safety re-check says when the observation made right before the call
// no longer decides the same step.
var errStepChanged = errors.New("the maintenance step is no longer the one decided")

// reconcileMaintenance does the one maintenance step DecideMaintenance gives, when
// spec.maintenance.defragmentation is set. A step done ends the pass (one change per pass); a
// step blocked or nothing to do lets the other phases run.
func (r *Reconciler) reconcileMaintenance(ctx context.Context, s *scope) (ctrl.Result, error) {
	spec := s.cpe.Spec.Maintenance
	if spec == nil || spec.Defragmentation == nil || s.snapshot == nil || s.backend == nil {
		return ctrl.Result{}, nil
	}
	m, ok := s.backend.(maintainer)
	if !ok {
		setMaintenanceMessage(s, fmt.Sprintf("the %s backend cannot defragment: etcd's maintenance API is not reachable through it", s.cpe.Spec.Backend))
		return ctrl.Result{}, nil
	}
	policy := defragPolicy(*spec.Defragmentation)
	last := lastDefragmented(s.cpe.Status.Maintenance)
	step := etcd.DecideMaintenance(s.snapshot, s.now, policy, last)
	switch step.Action {
	case etcd.MaintenanceMoveLeader:
		return r.moveLeaderForDefrag(ctx, s, step)
	case etcd.MaintenanceDefragment:
		return r.defragment(ctx, s, m, r.sameStep(policy, last, step), step, spec.Defragmentation.TimeoutOrDefault())
	case etcd.MaintenanceDisarmNoSpace:
		return r.disarmNoSpace(ctx, s, m, r.sameStep(policy, last, step), step)
	case etcd.MaintenanceBlocked:
		if s.cpe.Status.Maintenance == nil || s.cpe.Status.Maintenance.Message != step.Message {
			r.Recorder.Event(s.cpe, corev1.EventTypeWarning, v1alpha1.EventMaintenanceBlocked, step.Message)
		}
		// Note: looked at again at the observation interval, not sooner: what blocks maintenance
		// (a member down, data above the quota) does not pass in seconds, and every look is an
		// observation of every member.
	}
	setMaintenanceMessage(s, step.Message)
	return ctrl.Result{}, nil
}

// moveLeaderForDefrag moves leadership off the member to defragment, to the first candidate that
// takes it; the next pass defragments it as a follower, on a fresh observation.
func (r *Reconciler) moveLeaderForDefrag(ctx context.Context, s *scope, step etcd.MaintenanceStep) (ctrl.Result, error) {
	var errs []string
	for _, c := range step.Candidates {
		callCtx, cancel := context.WithTimeout(ctx, r.callTimeout())
		move, err := s.backend.MoveLeader(callCtx, step.Member, c)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		if move.Outcome == etcd.LeaderMoved {
			msg := fmt.Sprintf("Moved etcd leadership from %s to %s before defragmenting it (%s)", step.Member, c, step.Reason)
			r.Recorder.Event(s.cpe, corev1.EventTypeNormal, v1alpha1.EventDefragmentationLeaderMoved, msg)
			setMaintenanceMessage(s, msg)
		}
		return ctrl.Result{RequeueAfter: maintenanceStepInterval}, nil
	}
	msg := fmt.Sprintf("%s; leadership could not be moved off %s: %s", step.Message, step.Member, strings.Join(errs, "; "))
	if len(errs) == 0 {
		msg = fmt.Sprintf("%s; no healthy voter can take leadership from %s", step.Message, step.Member)
	}
	r.Recorder.Event(s.cpe, corev1.EventTypeWarning, v1alpha1.EventMaintenanceBlocked, msg)
	setMaintenanceMessage(s, msg)
	return ctrl.Result{}, nil
}

// defragment defragments the member the step names, once the observation made right before the
// call decides the same step (safety re-checked there), and records it with its sizes before and
// after.
func (r *Reconciler) defragment(ctx context.Context, s *scope, m maintainer, safe func(*etcd.Snapshot) error, step etcd.MaintenanceStep, timeout time.Duration) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	callCtx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w: defragmenting took longer than %s", etcd.ErrUnreachable, timeout))
	defer cancel()
	d, err := m.Defragment(callCtx, step.Member, safe)
	if errors.Is(err, errStepChanged) {
		log.V(2).Info("Not defragmenting: a fresh observation decides otherwise", "member", step.Member.String(), "err", err.Error())
		return ctrl.Result{RequeueAfter: maintenanceStepInterval}, nil
	}
	if d.Start.IsZero() {
		d = etcd.Defragmentation{Member: step.Member, Before: step.Before, Start: r.now()}
	}
	rec := defragmentationRecord(s, d, step.Reason, err)
	addDefragmentation(s, rec)
	if err != nil {
		msg := fmt.Sprintf("Defragmenting etcd member %s failed: %v", step.Member, err)
		r.Recorder.Event(s.cpe, corev1.EventTypeWarning, v1alpha1.EventDefragmentationFailed, msg)
		setMaintenanceMessage(s, msg)
		return ctrl.Result{}, fmt.Errorf("failed to defragment etcd member %s: %w", step.Member, err)
	}
	msg := fmt.Sprintf("Defragmented etcd member %s (%s) in %s: %s", step.Member, step.Reason, d.Took.Round(time.Millisecond), sizesBeforeAfter(d))
	log.Info("Defragmented etcd member", "member", step.Member.String(), "reason", step.Reason, "took", d.Took.String(), "sizes", sizesBeforeAfter(d))
	r.Recorder.Event(s.cpe, corev1.EventTypeNormal, v1alpha1.EventMemberDefragmented, msg)
	setMaintenanceMessage(s, msg)
	return ctrl.Result{RequeueAfter: maintenanceStepInterval}, nil
}

// disarmNoSpace disarms NOSPACE once the observation made right before still decides so.
func (r *Reconciler) disarmNoSpace(ctx context.Context, s *scope, m maintainer, safe func(*etcd.Snapshot) error, step etcd.MaintenanceStep) (ctrl.Result, error) {
	callCtx, cancel := context.WithTimeout(ctx, r.callTimeout())
	defer cancel()
	err := m.DisarmAlarms(callCtx, step.Alarms, safe)
	switch {
	case errors.Is(err, errStepChanged):
		return ctrl.Result{RequeueAfter: maintenanceStepInterval}, nil
	case err != nil:
		msg := fmt.Sprintf("Disarming NOSPACE failed: %v", err)
		r.Recorder.Event(s.cpe, corev1.EventTypeWarning, v1alpha1.EventMaintenanceBlocked, msg)
		setMaintenanceMessage(s, msg)
		return ctrl.Result{}, fmt.Errorf("failed to disarm NOSPACE: %w", err)
	}
	msg := "Disarmed NOSPACE: " + step.Message
	r.Recorder.Event(s.cpe, corev1.EventTypeNormal, v1alpha1.EventNoSpaceDisarmed, msg)
	setMaintenanceMessage(s, msg)
	now := metav1.NewTime(r.now())
	s.cpe.Status.Maintenance.LastNoSpaceDisarmTime = &now
	return ctrl.Result{RequeueAfter: maintenanceStepInterval}, nil
}

// sameStep is the safety re-check run on the observation made right before a maintenance call:
// the decision on it must be the same step, on the same member (or the same alarms).
func (r *Reconciler) sameStep(policy etcd.DefragPolicy, last map[uint64]time.Time, step etcd.MaintenanceStep) func(*etcd.Snapshot) error {
	return func(snap *etcd.Snapshot) error {
		fresh := etcd.DecideMaintenance(snap, r.now(), policy, last)
		same := fresh.Action == step.Action && fresh.Member.ID == step.Member.ID
		if step.Action == etcd.MaintenanceDisarmNoSpace {
			same = same && slices.Equal(fresh.Alarms, step.Alarms)
		}
		if !same {
			return fmt.Errorf("%w: now %s %s: %s", errStepChanged, fresh.Action, fresh.Member, fresh.Message)
		}
		return nil
	}
}

func defragmentationRecord(s *scope, d etcd.Defragmentation, reason string, err error) v1alpha1.DefragmentationRecord {
	rec := v1alpha1.DefragmentationRecord{
		Member: d.Member.String(), MemberID: s.snapshot.EtcdMemberID(d.Member.ID), Reason: reason,
		StartTime: metav1.NewTime(d.Start), DBSizeBefore: d.Before.DBSize, DBSizeInUseBefore: d.Before.DBSizeInUse,
	}
	if d.Took > 0 {
		rec.Duration = &metav1.Duration{Duration: d.Took}
	}
	if d.After != nil {
		rec.DBSizeAfter, rec.DBSizeInUseAfter = &d.After.DBSize, &d.After.DBSizeInUse
	}
	if err != nil {
		rec.Error = etcd.SanitizeText(err.Error(), etcd.MaxMemberMessageBytes)
	}
	return rec
}

func addDefragmentation(s *scope, rec v1alpha1.DefragmentationRecord) {
	st := maintenanceStatus(s)
	st.Defragmentations = append(st.Defragmentations, rec)
	if n := len(st.Defragmentations); n > v1alpha1.MaxDefragmentationRecords {
		st.Defragmentations = st.Defragmentations[n-v1alpha1.MaxDefragmentationRecords:]
	}
}

func setMaintenanceMessage(s *scope, msg string) {
	maintenanceStatus(s).Message = etcd.SanitizeText(msg, etcd.MaxMemberMessageBytes)
}

func maintenanceStatus(s *scope) *v1alpha1.MaintenanceStatus {
	if s.cpe.Status.Maintenance == nil {
		s.cpe.Status.Maintenance = &v1alpha1.MaintenanceStatus{}
	}
	return s.cpe.Status.Maintenance
}

func sizesBeforeAfter(d etcd.Defragmentation) string {
	before := fmt.Sprintf("database %s (%s in use) before", etcd.FormatBytes(d.Before.DBSize), etcd.FormatBytes(d.Before.DBSizeInUse))
	if d.After == nil {
		return before + ", its size after not known (it did not answer Status)"
	}
	return fmt.Sprintf("%s, %s (%s in use) after", before, etcd.FormatBytes(d.After.DBSize), etcd.FormatBytes(d.After.DBSizeInUse))
}

// lastDefragmented is when each member was last defragmented without error, by member ID, from
// status.maintenance.
func lastDefragmented(st *v1alpha1.MaintenanceStatus) map[uint64]time.Time {
	out := map[uint64]time.Time{}
	if st == nil {
		return out
	}
	for _, rec := range st.Defragmentations {
		id, err := strconv.ParseUint(rec.MemberID, 16, 64)
		if err != nil || rec.Error != "" {
			continue
		}
		if at := rec.StartTime.Time; at.After(out[id]) {
			out[id] = at
		}
	}
	return out
}

// defragPolicy reads spec.maintenance.defragmentation as the decision's policy.
func defragPolicy(d v1alpha1.DefragmentationSpec) etcd.DefragPolicy {
	p := etcd.DefragPolicy{OnNoSpace: d.OnNoSpaceOrDefault(), Quota: d.QuotaBackendBytesOrDefault(), HeadroomPercent: d.NoSpaceHeadroomPercentOrDefault()}
	if d.FreeBytesThreshold != nil {
		p.FreeBytes = max(d.FreeBytesThreshold.Value(), 0)
	}
	if d.FreePercentThreshold != nil {
		p.FreePercent = min(max(*d.FreePercentThreshold, 0), 100)
	}
	return p
}
