// Package external implements etcd.Cluster for a workload cluster whose etcd is external to its
// control plane: a KubeadmControlPlane with spec.kubeadmConfigSpec.clusterConfiguration.etcd.external,
// where the members run outside the control-plane Machines and KCP skips every etcd check.
//
// The backend dials members directly with clientv3, only where the Cluster's objects say: the
// endpoints it is given (KCP's external.endpoints, an EtcdadmCluster's status.endpoints) and
// client URLs members report on the hosts it is given (an etcdadm Cluster's etcd Machines),
// within the allowed networks (egress.go). A client URL found only in a member list is never
// dialled. It verifies each server certificate against the etcd CA and presents the client
// certificate the workload apiserver itself uses. Both come from the management cluster, named
// as Cluster API's util/secret names them for external etcd:
//
//   - `<cluster>-etcd` (secret.EtcdCA): tls.crt, the CA that issued the members' server
//     certificates; tls.key is not needed and not read;
//   - `<cluster>-apiserver-etcd-client` (secret.APIServerEtcdClient): tls.crt and tls.key, the
//     client certificate KCP mounts for the apiserver's --etcd-certfile/--etcd-keyfile.
//
// External members host no Node of the workload cluster: Member.NodeName is the member name,
// which is the host name for etcdadm and kubeadm-deployed members.
//
// Observing the members and changing the cluster (the decision, the removal and its confirmation,
// moving leadership) are pkg/internal/membership's, shared with pkg/kubeadm; this package dials
// each member and places the members by their client URLs.
package external
