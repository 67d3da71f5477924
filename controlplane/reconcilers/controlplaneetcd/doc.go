// Package controlplaneetcd reconciles ControlPlaneEtcd objects: it keeps their status current
// (observe.go, status.go), and in Manage mode holds every control-plane Machine with a
// pre-terminate hook and removes its etcd member after the drain (hook.go), and removes ghost
// members of kubeadm clusters (ghosts.go). One membership change per pass, safety re-checked on
// a fresh observation right before each destructive call, and everything re-derived from the
// cluster on every pass, so a restarted controller carries on where the last one stopped.
package controlplaneetcd
