// Package etcdtest is the conformance suite every etcd.Cluster backend must pass.
//
// A backend's test provides a Harness: it starts a fresh workload cluster with n etcd members
// and the backend under test connected to it, and hands back fault handles (kill, restart,
// NOSPACE, learner, split brain, broken CA, apiserver down ...) implemented with the real test
// environment (test/env). Run drives every Case through the backend and asserts the outcome
// through the etcd.Cluster interface and the pure decisions of pkg/etcd (AssessHealth,
// CanRemoveMember, LeaderCandidates, ConditionReasonFor), never through backend internals, so
// pkg/kubeadm and pkg/k3s are held to the same behaviour.
//
// Every case checks what the backend says against etcd's own member list (the ground truth the
// harness reads directly), so a backend cannot pass by saying Removed, or by not acting.
//
// A backend that cannot run a case declares it in Harness.NotApplicable with a reason. Such a
// case is not run and not counted as passed: Run logs every one of them, by name and reason, in
// its summary. The Required cases (healthy clusters, a killed member, unknown health, a removal
// that would lose quorum, removals that complete, duplicate names, transient errors, the
// apiserver down) cannot be declared away: Run fails when a harness tries.
package etcdtest
