// Package machinehook is a mutating admission webhook on CREATE of control-plane Machines: it
// puts v1alpha1.PreTerminateHookAnnotation on every new control-plane Machine of a Cluster that
// etcd-adapter manages (mode Manage), so the Machine is held for the drain-before-removal flow
// from the moment it exists. A Machine deleted before the ControlPlaneEtcd controller's first
// pass would otherwise be deleted with no drain before its etcd member goes (the ordering that
// breaks K3s, cluster-api-k3s issue 96). The controller still adds the hook on every pass, as a
// backstop for Machines this webhook let through without it.
//
// A Cluster is managed when its ControlPlaneEtcd says Manage or, when it has none yet, when the
// creation controller's rule (creation.DefaultFor) would give it one in Manage mode. Machines of
// Observe-mode Clusters (KubeadmControlPlane: KCP removes members itself) are left untouched.
package machinehook
