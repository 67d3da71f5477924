// Package provider is what a control-plane provider that is not KubeadmControlPlane (a
// KThreesControlPlane, an RKE2ControlPlane, your own) calls around scale-down, rollout and
// remediation when it embeds etcd-adapter's decisions: an observation read against plain
// etcd.Machine data, a preflight that leaves out the Machines being removed, the scale-down and
// remediation gates, and a condition writer that writes through the provider's own Sink with
// the provider's own condition names, so its users keep the conditions they alert on.
//
// It needs no Cluster API, controller-runtime or client-go: a provider converts its Machines
// (v1beta1 or v1beta2) to etcd.Machine in one line each and writes the conditions with the
// conditions package of the Cluster API version it already uses.
//
// Everything here is pure: the provider observes etcd (etcd.Cluster.Observe) once per reconcile
// and passes the snapshot, or the error, to each call.
package provider
