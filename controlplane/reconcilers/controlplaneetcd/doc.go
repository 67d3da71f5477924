// Package controlplaneetcd reconciles ControlPlaneEtcd objects: it keeps their status current
// (observe.go, status.go), and in Manage mode holds every control-plane Machine with a
// pre-terminate hook (hookplacement.go) and removes its etcd member after the drain, and removes
// ghost members of kubeadm clusters (ghosts.go). One membership change per pass, safety
// re-checked on a fresh observation right before each destructive call, and everything
// re-derived from the cluster on every pass, so a restarted controller carries on where the last
// one stopped.
//
// The removal flow of the deleting Machines is split by step. deleting.go runs the loop over the
// deleting Machines; each step returns its outcome (released, waiting or acted, with the
// Progressing condition to show and when to come back), and the loop alone applies it to the
// pass. removal.go holds the quorum re-check and the removal request (settled in the same pass
// when the backend's answer confirms it), leadership.go moves leadership off the member to
// remove (already while its Machine drains), beside.go decides about another Machine's removal
// in status.removal, confirm.go confirms a removal asked in an earlier pass, stop.go stops one
// that was rejected or timed out, and release.go releases the hook. removalrecord.go is status.removal
// itself (removalRecord): how a removal is opened, closed and recognised, and its write-ahead.
package controlplaneetcd
