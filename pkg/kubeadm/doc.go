// Package kubeadm implements etcd.Cluster for kubeadm's stacked etcd, the way
// KubeadmControlPlane reaches it, but safer and faster.
//
// Every member is reached with clientv3 through a port-forward of the workload apiserver to
// pod kube-system/etcd-<node>, port 2379 (the kubelet's own WebSocket protocol first, then
// SPDY over WebSocket, then SPDY; the transport is internal/portforward, and this package
// completes the TLS handshake over it). The client
// certificate is minted, short-lived, from the CA in the management cluster's
// `<cluster>-etcd` Secret; the server certificate must chain to that CA and name the Node
// being dialled. Connections are kept per member, probed before use, replaced when broken and
// evicted when idle; Close closes them all.
//
// Important! This backend relies on kubeadm's naming: the etcd member hosted on a Node is
// named after the Node, and its static Pod is kube-system/etcd-<node>. A member whose name is
// not a Node name is reported, but cannot be asked directly.
//
// Observing the members and changing the cluster (the decision, the removal and its confirmation,
// moving leadership) are pkg/internal/membership's, shared with pkg/external; this package
// reaches each member through the port-forward and places the members on Nodes.
//
// One Backend serves one workload cluster; see docs/kubeadm-backend.md.
package kubeadm
