// Package workload assembles a whole workload cluster of any flavour from the parts of the
// test environment, so tests, benchmarks and the demo start one with a single call:
//
//   - StartKubeadm: a kube-apiserver, a real TLS etcd cluster whose members are named after
//     their Nodes, a kubelet stand-in per Node forwarding port 2379 to that Node's member, and
//     the static Pods kube-system/etcd-<node>, so the apiserver's pods/portforward reaches etcd
//     exactly as KCP's client does;
//   - StartK3s: a kube-apiserver, a real TLS etcd cluster with K3s member names
//     (<node>-<8 hex>), a kubelet stand-in per Node (none with NoKubelets: the simulator then
//     writes Ready itself, as test/k3sbackend runs it), and the K3s simulator of one version
//     profile maintaining the Node annotations and the EtcdIsVoter condition;
//   - StartExternal: a kube-apiserver and a real TLS etcd cluster outside it, as etcdadm runs
//     one, with the Secrets Cluster API names for external etcd (Secrets).
//
// Registering the cluster in a management cluster is a separate step (env.RegisterCluster),
// because not every test needs one.
package workload
