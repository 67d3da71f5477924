// Package k3ssim simulates what K3s (and RKE2) do with Node objects for their embedded etcd,
// against a real workload kube-apiserver and a real etcd cluster, so that the adapter's K3s
// path can be tested without K3s itself.
//
// It follows /work/shared/reference/k3s-etcd-contract.md ("the contract") line by line:
// the metadata controller (node-name/node-address annotations and role labels), the
// EtcdIsVoter Node condition written by the raft leader's process, the member controller
// (removal by the "remove" annotation and the Node-deletion finalizer), what happens to a
// removed server (tombstone, NotReady, rejoin as a learner under a new member name) and the
// learner promotion loop, each per K3s version profile (see Profile).
//
// The simulator owns no etcd: it drives the cluster through the small EtcdCluster interface,
// which the test environment implements (see NewEtcdClusterAdapter in the test suite).
package k3ssim
