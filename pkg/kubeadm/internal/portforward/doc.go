// Package portforward is kubeadm's transport to a stacked etcd member: a port-forward to the
// client port of the member's etcd static Pod through the workload apiserver, over the
// kubelet's own WebSocket protocol, SPDY over WebSocket or SPDY, whichever the apiserver
// accepts, as a net.Conn that honours deadlines and tells what the kubelet reported. It knows
// nothing of etcd's TLS or clientv3: pkg/kubeadm completes the TLS handshake over a Conn.
// Cluster API likewise keeps KCP's port-forward in a package of its own
// (sigs.k8s.io/cluster-api v1.14.2 controlplane/kubeadm/pkg/proxy).
package portforward
