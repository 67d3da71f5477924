// Package provider is what a control-plane provider calls around scale and remediation when it
// embeds etcd-adapter instead of running its manager: a preflight that says whether every member
// is healthy (and which are not, and why), the scale-down and remediation gates, and a writer of
// KubeadmControlPlane-compatible conditions (EtcdMemberHealthy on Machines, EtcdClusterHealthy on
// the control-plane object), so users keep the condition types and reasons they alert on.
//
// It is the Cluster API v1beta2 face of pkg/etcd/provider, which a provider on another Cluster API
// version (or with v1beta1 conditions and names of its own) uses directly.
//
// Everything here is pure: the provider observes etcd (etcd.Cluster.Observe) once per reconcile
// and passes the snapshot, or the error, to each call.
package provider
