// Package controlplane holds what turns etcd-adapter's decisions into behaviour: the provider
// library (provider) for control-plane providers that embed it, the backends registry (backends)
// that reaches each Cluster's etcd, the controllers (reconcilers) and the quorum guard webhook
// (webhooks), and setup, which adds them all to a manager.
package controlplane
