// Package membership is the one algorithm every clientv3 backend (pkg/kubeadm, pkg/external)
// uses to observe an etcd cluster and remove a member from it: ask every member, decide the
// cluster from their answers (its cluster ID, member list, leader and alarms), send a removal
// through another member, leader first, and confirm it with a linearizable member list.
//
// A backend supplies only what it does its own way, through Transport: how it reaches the
// member at a place (kubeadm: a port-forward through the workload apiserver to the etcd Pod of
// a Node; external: a direct dial of a client URL), and how it records a member it is removing
// at that place. Places are strings the backend chooses (a Node name, an endpoint); the core
// only compares and sorts them. Where the backends place members on Nodes or endpoints, and the
// evidence they file for each, stays with the backend.
package membership
