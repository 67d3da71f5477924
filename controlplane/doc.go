// Package controlplane holds what turns etcd-adapter's decisions into behaviour: the provider
// library (provider) for control-plane providers that embed it, the backends registry (backends)
// that reaches each Cluster's etcd, the controllers (reconcilers), the webhooks (the quorum guard
// on Machine deletion, and machinehook, which puts the pre-terminate hook on new control-plane
// Machines), and setup, which adds them all to a manager.
package controlplane
