// Package k3s is the etcd.Cluster backend for K3s (and RKE2) embedded etcd. It never connects to
// etcd: everything it knows and does goes through the Node objects of the workload cluster, as
// K3s's own embedded-etcd controllers keep them (k3s-io/k3s pkg/etcd/etcd.go,
// member_controller.go and metadata_controller.go; see docs/k3s-backend.md).
//
// What it reads: Nodes labelled node-role.kubernetes.io/etcd=true, their
// etcd.k3s.cattle.io/node-name and node-address annotations (member name and peer address), the
// EtcdIsVoter condition the etcd leader's K3s writes (voter, learner, Unhealthy with K3s's own
// message, NotAMember), the Ready condition, and status.nodeInfo.kubeletVersion, which selects
// the per-version rules (those of the oldest version among the etcd Nodes, since only the etcd
// leader's K3s writes the condition). RKE2 is the same code under etcd.rke2.cattle.io/ keys.
//
// What it writes: to remove a member, one optimistic-concurrency patch that records the member
// name (RemovingMemberAnnotation) and sets etcd.k3s.cattle.io/remove=true. K3s's
// member controller does the removal and reports it with removed-node-name; the backend notices
// that from a watch on Nodes (Start, AttachInformer, or Watcher for CAPI's clustercache).
//
// What it cannot see, and says so in every Snapshot's BlindSpots: members no Node hosts (ghost
// members), members' own member lists and cluster IDs, alarms and the leader. K3s exposes no
// etcd member IDs on Nodes, so a member's ID here is synthetic: the FNV-1a 64-bit hash of its
// member name (MemberID), stable for as long as the member keeps its name. It keys the member
// inside a Snapshot and nothing more: snapshots say SyntheticMemberIDs, so the ControlPlaneEtcd
// status, Events and logs name a K3s member by its name and Node, never by this ID, which is not
// the one etcd shows for it.
package k3s
