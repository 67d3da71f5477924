package controlplaneetcd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// maxNotStartedMembers is the most status.notStartedMembers holds (the CRD's MaxItems).
const maxNotStartedMembers = 32

// reconcileGhosts removes one member that never started and whose join is over (a learner
// whose Machine's Node never registered, or one left unstarted past spec.joinTimeout on a Node
// that exists) or that no Node hosts (the member of a Machine deleted without its hook, whose
// Node Cluster API deleted), in Manage mode on kubeadm clusters. K3s cannot see such members
// (its snapshots declare the blind spot), so EtcdClusterHealthy reports that instead.
//
// Note: while a Machine is provisioning its member may not be mapped yet, so nothing is removed
// then (as KCP does); and the removal must keep quorum like any other.
//
// Important! A started member on a Node that exists is never removed here, even when no Machine
// is bound to that Node: it serves that Node's control plane, and its Machine may simply not
// exist yet (a ControlPlaneEtcd created before the Machines, Machines recreated after a restore,
// a Node joined by hand). Status reports it; a person decides. A member that has not started on
// such a Node may be joining (joinVerdict): it is left alone until spec.joinTimeout has passed
// since it was first seen, and Progressing says so.
func (r *Reconciler) reconcileGhosts(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.cpe.Spec.Backend != v1alpha1.BackendKubeadm || s.snapshot == nil || s.controlPlaneDeleting || s.clusterID.Refuse {
		return ctrl.Result{}, nil
	}
	s.cpe.Status.NotStartedMembers = notStartedMembers(s.cpe.Status.NotStartedMembers, s.snapshot, s.now)
	for _, m := range s.machines {
		if m.Status.NodeRef.Name == "" && m.DeletionTimestamp.IsZero() {
			return ctrl.Result{}, nil
		}
	}
	scan := s.scanGhosts()
	s.reportJoinWait(scan.waits)
	if len(scan.ghosts) == 0 {
		return ctrl.Result{}, nil
	}
	ghost := scan.ghosts[0]
	log := ctrl.LoggerFrom(ctx).WithValues(memberLogValues(s.snapshot, ghost)...)
	verdict := etcd.CanRemoveMember(s.snapshot, s.now, ghost)
	log.V(2).Info("Quorum projection for ghost member removal", "allowed", verdict.Allowed, "reason", verdict.Reason, "message", verdict.Message)
	if !verdict.Allowed {
		return ctrl.Result{}, nil
	}
	if _, o, goesOn := r.snapshotBefore(ctx, s, nil, ghost.NodeName); !goesOn {
		s.apply(o)
		return s.requeue(), nil
	}
	if stale, err := r.machinesChangedSince(ctx, s); err != nil || stale {
		log.V(2).Info("Control-plane Machines changed since this pass read them; the ghost removal waits for the next pass", "error", err)
		s.wantRequeue(time.Second)
		return s.requeue(), err
	}
	callCtx, cancel := context.WithTimeout(ctx, r.callTimeout())
	defer cancel()
	removal, err := s.backend.RemoveMember(callCtx, ghost)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to remove ghost etcd member %s of ControlPlaneEtcd %s: %w", ghost, klog.KObj(s.cpe), err)
	}
	log.Info("Ghost member removal", "state", removal.State, "reason", removal.Reason)
	if removal.State == etcd.RemovalRemoved {
		r.Recorder.Eventf(s.cpe, corev1.EventTypeNormal, v1alpha1.EventGhostMemberRemoved, "Removed etcd member %s, which no control-plane Machine hosts", memberWithID(s.snapshot, ghost))
	}
	s.wantRequeue(removalPollInterval)
	return s.requeue(), nil
}

// machinesChangedSince reads the control-plane Machines uncached, right before a ghost removal,
// and reports whether they differ from the ones this pass decided on: a Machine the cache did not
// have yet, or one whose Node registered or that started deleting since. A Machine created just
// before its learner was added would otherwise be missing from a lagging cache, and its learner
// removed as nobody's.
func (r *Reconciler) machinesChangedSince(ctx context.Context, s *scope) (bool, error) {
	if r.APIReader == nil {
		return false, nil
	}
	live, err := backends.ListControlPlaneAndEtcdMachines(ctx, r.APIReader, s.cluster.Namespace, s.cluster.Name)
	if err != nil {
		return false, fmt.Errorf("failed to read the control-plane Machines before a ghost removal: %w", err)
	}
	decided := make(map[string]*clusterv1.Machine, len(s.machines))
	for _, m := range s.machines {
		decided[m.Name] = m
	}
	n := 0
	for _, m := range live {
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; !cp {
			continue
		}
		n++
		was, ok := decided[m.Name]
		if !ok || was.UID != m.UID || was.Status.NodeRef.Name != m.Status.NodeRef.Name || was.DeletionTimestamp.IsZero() != m.DeletionTimestamp.IsZero() {
			return true, nil
		}
	}
	return n != len(s.machines), nil
}

// joinWait is a member that has not started and may still be joining, and when the ghost
// cleanup stops waiting for it.
type joinWait struct {
	member  etcd.Member
	machine string
	until   time.Time
}

// ghostScan is the ghost decision of one pass: the ghosts in removal order, and the members
// whose join is waited for, soonest end first.
type ghostScan struct {
	ghosts []etcd.Member
	waits  []joinWait
}

// scanGhosts decides for every member whether it is a ghost now; never-started members and
// learners go first (RemovalOrder), so every pass picks the same one.
//
// Important! A started member whose name ties it to a control-plane Machine (etcd.BelongsToMachine:
// its Machine's Node or name) is never a ghost, even when its Node object is gone (kubeadm then
// places it on no Node): a running Machine's member still serves, and a deleting Machine's member
// is removed by that Machine's removal flow, quorum-checked, before its hook goes.
func (s *scope) scanGhosts() ghostScan {
	facts := s.machineFacts()
	seen := firstSeenByID(s.cpe.Status.NotStartedMembers)
	timeout := s.cpe.Spec.JoinTimeoutOrDefault()
	var scan ghostScan
	for _, m := range s.snapshot.Members {
		host := s.machineOnNode(m.NodeName)
		ghost, until := joinVerdict(m, host, facts, seen[strconv.FormatUint(m.ID, 16)], s.now, timeout)
		switch {
		case ghost:
			scan.ghosts = append(scan.ghosts, m)
		case !until.IsZero():
			w := joinWait{member: m, until: until}
			if host != nil {
				w.machine = host.Name
			}
			scan.waits = append(scan.waits, w)
		}
	}
	if len(scan.ghosts) == len(s.snapshot.Members) {
		scan.ghosts = nil
	}
	if len(scan.ghosts) > 0 {
		scan.ghosts = etcd.RemovalOrder(etcd.AssessMembers(s.snapshot, s.now), scan.ghosts)
	}
	slices.SortFunc(scan.waits, func(a, b joinWait) int { return a.until.Compare(b.until) })
	return scan
}

// joinVerdict says whether member m is a ghost now; for a member that may still be joining it
// returns, instead, until when it is not. host is the control-plane Machine on m's Node (nil when
// none), machines every control-plane Machine, firstSeen when m was first seen not started (zero:
// not recorded, so it is seen now).
//
// A started member is a ghost when no Node hosts it and its name ties it to no Machine. A member
// that has not started serves nothing, but it may be joining: kubeadm join without
// ControlPlaneKubeletLocalMode registers the Node in kubelet-start, before control-plane-join adds
// the etcd learner (MemberAddAsLearner), which has no name until its static Pod starts, after an
// image pull that can take minutes (k8s.io/kubernetes v1.32 cmd/kubeadm/app/cmd/phases/join
// kubelet.go, controlplanejoin.go). So one placed on a Node that exists, whose Machine (if any)
// is not being deleted, is given joinTimeout from firstSeen to start. Once that passed, kubeadm
// has given up on it and failed the join: it is a ghost. (KCP v1.14 waits less: it removes a
// member without a name once its Node is 20 s old while EtcdClusterHealthy is not True,
// etcdMemberStartupGracePeriod in controlplane/kubeadm/reconcilers/kubeadmcontrolplane
// kubeadmcontrolplane_controller.go.) One on no Node, or
// on a deleting Machine's Node, is a ghost at once.
func joinVerdict(m etcd.Member, host *clusterv1.Machine, machines []etcd.Machine, firstSeen, now time.Time, joinTimeout time.Duration) (ghost bool, until time.Time) {
	if m.Started() {
		return m.NodeName == "" && !etcd.BelongsToMachine(m, machines), time.Time{}
	}
	if m.NodeName == "" || (host != nil && !host.DeletionTimestamp.IsZero()) {
		return true, time.Time{}
	}
	if firstSeen.IsZero() || firstSeen.After(now) {
		firstSeen = now
	}
	until = firstSeen.Add(joinTimeout)
	if now.Before(until) {
		return false, until
	}
	return true, time.Time{}
}

// reportJoinWait sets Progressing for the join waited for longest, unless a phase already set it,
// and brings the next pass back when that wait ends.
func (s *scope) reportJoinWait(waits []joinWait) {
	if len(waits) == 0 {
		return
	}
	w := waits[0]
	s.wantRequeue(max(w.until.Sub(s.now), time.Second))
	if s.progressing != nil {
		return
	}
	on := "Node " + w.member.NodeName
	if w.machine != "" {
		on += " of Machine " + w.machine
	}
	msg := fmt.Sprintf("Etcd member %s on %s may still be joining (kubeadm adds the learner before its etcd starts); "+
		"it is removed as a ghost if it has not started by %s (spec.joinTimeout %s)",
		memberWithID(s.snapshot, w.member), on, w.until.UTC().Format(time.RFC3339), s.cpe.Spec.JoinTimeoutOrDefault())
	if len(waits) > 1 {
		msg += fmt.Sprintf("; %d more member(s) may be joining", len(waits)-1)
	}
	s.progressing = &metav1.Condition{Type: v1alpha1.ProgressingCondition, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ProgressingWaitingForJoinReason, Message: msg}
}

// notStartedMembers returns status.notStartedMembers for the snapshot: every member that has not
// started, with the time it was first seen so (kept from records, else now). A member that
// started or is gone leaves the list, so one that stops being named again starts a new clock.
// At most maxNotStartedMembers are kept, the longest known first; one left out is seen anew.
func notStartedMembers(records []v1alpha1.NotStartedMemberStatus, snap *etcd.Snapshot, now time.Time) []v1alpha1.NotStartedMemberStatus {
	seen := firstSeenByID(records)
	var out []v1alpha1.NotStartedMemberStatus
	for _, m := range snap.Members {
		if m.Started() {
			continue
		}
		id := strconv.FormatUint(m.ID, 16)
		first, ok := seen[id]
		if !ok {
			// Note: the status keeps whole seconds; rounding up keeps the clock from starting
			// before the member was seen.
			first = now.Truncate(time.Second)
			if first.Before(now) {
				first = first.Add(time.Second)
			}
		}
		out = append(out, v1alpha1.NotStartedMemberStatus{ID: id, FirstSeenTime: metav1.NewTime(first)})
	}
	slices.SortFunc(out, func(a, b v1alpha1.NotStartedMemberStatus) int {
		return cmp.Or(a.FirstSeenTime.Compare(b.FirstSeenTime.Time), cmp.Compare(a.ID, b.ID))
	})
	if len(out) > maxNotStartedMembers {
		out = out[:maxNotStartedMembers]
	}
	return out
}

// firstSeenByID maps each recorded member ID to when it was first seen not started.
func firstSeenByID(records []v1alpha1.NotStartedMemberStatus) map[string]time.Time {
	out := make(map[string]time.Time, len(records))
	for _, r := range records {
		out[r.ID] = r.FirstSeenTime.Time
	}
	return out
}
