// Package etcd is the one interface a control-plane provider uses to reach the etcd cluster of a
// workload cluster, plus the pure decision logic built on what that interface observes.
//
// A backend (pkg/kubeadm for stacked etcd, pkg/k3s for K3s embedded etcd) implements Cluster. It
// observes a Snapshot, moves leadership and removes members. Everything that decides (member and
// cluster health, whether a member may be removed, who should take leadership) is a pure function
// over a Snapshot and plain Machine facts, so it is tested without any I/O and behaves the same
// for every backend.
package etcd
