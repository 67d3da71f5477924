package controlplaneetcd

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// reconcileGhosts removes one member that never started (a learner whose Machine's Node never
// registered) or that no Node hosts (the member of a Machine deleted without its hook, whose
// Node Cluster API deleted), in Manage mode on
// kubeadm clusters. K3s cannot see such members (its snapshots declare the blind spot), so
// EtcdClusterHealthy reports that instead.
//
// Note: while a Machine is provisioning its member may not be mapped yet, so nothing is removed
// then (as KCP does); and the removal must keep quorum like any other.
//
// Important! A member on a Node that exists is never removed here, even when no Machine is bound
// to that Node: it serves that Node's control plane, and its Machine may simply not exist yet (a
// ControlPlaneEtcd created before the Machines, Machines recreated after a restore, a Node joined
// by hand). Status reports it; a person decides.
func (r *Reconciler) reconcileGhosts(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.cpe.Spec.Backend != v1alpha1.BackendKubeadm || s.snapshot == nil || s.controlPlaneDeleting {
		return ctrl.Result{}, nil
	}
	for _, m := range s.machines {
		if m.Status.NodeRef.Name == "" && m.DeletionTimestamp.IsZero() {
			return ctrl.Result{}, nil
		}
	}
	ghost, ok := s.firstGhost()
	if !ok {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues(memberLogValues(s.snapshot, ghost)...)
	verdict := etcd.CanRemoveMember(s.snapshot, s.now, ghost)
	log.V(2).Info("Quorum projection for ghost member removal", "allowed", verdict.Allowed, "reason", verdict.Reason, "message", verdict.Message)
	if !verdict.Allowed {
		return ctrl.Result{}, nil
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

// firstGhost picks the member to remove first: never-started members and learners before
// others (RemovalOrder), so every pass picks the same one.
//
// Important! A started member whose name ties it to a control-plane Machine (etcd.BelongsToMachine:
// its Machine's Node or name) is never a ghost, even when its Node object is gone (kubeadm then
// places it on no Node): a running Machine's member still serves, and a deleting Machine's member
// is removed by that Machine's removal flow, quorum-checked, before its hook goes.
func (s *scope) firstGhost() (etcd.Member, bool) {
	facts := s.machineFacts()
	var ghosts []etcd.Member
	for _, m := range s.snapshot.Members {
		// A member that never started serves nothing; one on no Node was left behind.
		if !m.Started() || (m.NodeName == "" && !etcd.BelongsToMachine(m, facts)) {
			ghosts = append(ghosts, m)
		}
	}
	if len(ghosts) == 0 || len(ghosts) == len(s.snapshot.Members) {
		return etcd.Member{}, false
	}
	return etcd.RemovalOrder(etcd.AssessMembers(s.snapshot, s.now), ghosts)[0], true
}
