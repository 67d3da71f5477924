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
// TestSoak runs only when SOAK_DURATION or SOAK_SCENARIOS is set, through make soak, which is
// not part of make test:
//
//	make soak SOAK_DURATION=1h   # the seed is printed first
//	make soak SOAK_SEED=42 SOAK_SCENARIOS=3 SOAK_BACKENDS=kubeadm,k3s SOAK_EVENTS=8
//
// Each scenario builds one cluster of a backend (kubeadm, K3s, etcdadm in turn) in mode Manage
// with two manager processes under leader election, and plays SOAK_EVENTS events the seed picks
// among those that apply. The checker reports a violation when a member is removed while its
// Machine is not deleting, a Machine goes (or deletes without the hook) while its member is
// listed, a removal the soak did not make leaves fewer started voters than a majority, two
// MemberRemove calls reach one member's removal, or a deleting Machine is not gone 3 minutes
// after the world healed with no condition naming it. The replicas' logs go to SOAK_LOGDIR (a
// new temporary directory when unset). The seed fixes the choice of events for the states
// reached; the timing of real components can still take a run elsewhere.
package soak
