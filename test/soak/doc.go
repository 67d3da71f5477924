// Package soak plays a seeded, reproducible random sequence of what a management cluster sees
// (control-plane joins in either kubeadm order, deletions by a person, MachineHealthCheck
// remediations, a control-plane provider's scale up and down, a member's etcd stopping and
// coming back, a Node object deleted, the etcd-adapter manager killed, its leader killed under
// leader election) against real components: a management apiserver with Cluster API's Machine and
// MachineHealthCheck controllers, real multi-member TLS etcd, the kubelet stand-ins and the K3s
// simulator. A checker samples etcd itself (clientv3 member lists, and the MemberRemove calls the
// members answered) and the Machines every 200 ms, and reports every breach of etcd-adapter's
// promises; etcd-adapter's own status is never taken as evidence.
//
// TestSoak runs only when SOAK_DURATION or SOAK_SCENARIOS is set (make soak); see
// docs/operations.md.
package soak
