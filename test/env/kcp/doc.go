// Package kcp runs Cluster API's KubeadmControlPlane (KCP) v1.14.2 reconciler in-process, with
// the kubeadm bootstrap (KubeadmConfig) reconciler and Cluster API's Cluster, Machine and
// MachineHealthCheck controllers, against a workload cluster that KCP builds from nothing.
//
// What stands in for the machines: KCP clones TestMachines from a TestMachineTemplate; the
// provisioner here waits for each Machine's bootstrap data (the kubeadm provider's real
// cloud-config) and does what it says. `kubeadm init` starts a one-member TLS etcd cluster with
// the etcd CA from the bootstrap data and uploads kubeadm-config (the ClusterConfiguration from
// the bootstrap data), kubelet-config, CoreDNS and kube-proxy; `kubeadm join` adds a learner,
// starts it and promotes it, in the order the cluster's kubeadm gate gives: without
// ControlPlaneKubeletLocalMode the Node (on a loopback address of its own) registers first and
// the learner starts only once the Machine has its nodeRef and Options.EtcdStartDelay passed.
// Each Machine's Node is registered with its providerID and
// kubeadm's control-plane label and taint, a kubelet stand-in serves port-forward to the etcd
// Pod (2379, the member) and to the kube-apiserver Pod (6443, the workload apiserver), and the
// four static-Pod mirrors KCP inspects exist. Deleting a TestMachine powers its host off.
//
// The workload apiserver is set up as kubeadm sets it up: its serving certificate
// (CN kube-apiserver) is signed by the cluster CA, and it trusts the cluster CA for client
// certificates, so the `<cluster>-kubeconfig` Secret KCP writes works. The cluster CA is
// created before KCP runs (`<cluster>-ca`), as a user bringing their own CA does; KCP
// generates the etcd, front-proxy and service-account CAs.
//
// Fault handles (MemberDown, NodeNotReady/NodeReady, StaticPodFailing, MemberNoSpace,
// DisarmAlarms, FailNextJoin) act on KCP's Machines by name, and return once the fault is in
// place: the member stopped, the Node written with its Ready condition, the Pod deleted, the
// alarm (or its absence) reported by every running member.
//
// Note: KCP reads etcd only when it reconciles, and a settled KCP reconciles only on a change
// to the KCP, its Machines or the Cluster, or at its resync (10 min by default): a fault in place
// is not yet a fault KCP shows.
//
// With Options.EtcdAdapter, etcd-adapter runs beside KCP as its manager binary runs it
// (controlplane/setup with the webhooks): its CRD and config/webhook are installed on the
// management apiserver, which calls the webhooks served in-process. Every answer of the quorum
// guard to a Machine DELETE is recorded (GuardDecisions), with who asked: KCP's manager
// impersonates KCP's ServiceAccount (KCPUser) and PersonClient a person (PersonUser), since all
// in-process clients share the test's administrator certificate.
package kcp
