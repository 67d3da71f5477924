// Package demo is etcd-adapter's playground and narrated scenario, the README's main job
// (`make demo`, `make run`). On a machine with only Go it builds the test binaries it needs
// (kube-apiserver and etcd, from the Go module proxy, once), then starts, in one process:
//
//   - a management cluster: a real kube-apiserver with Cluster API's v1beta2 CRDs and Cluster
//     API's own Machine and MachineHealthCheck controllers, and the etcd-adapter manager (the very
//     one cmd/etcd-adapter runs, with its quorum guard webhook);
//   - a Cluster "k3s" with a 3-server K3s control plane (real TLS etcd, kubelet stand-ins and
//     the K3s simulator writing Node annotations and conditions as K3s v1.34 does);
//   - a Cluster "kubeadm" with a 3-member kubeadm stacked-etcd control plane (real TLS etcd
//     reached through the workload apiserver's pods/portforward, as KubeadmControlPlane does).
//
// and plays the scenario: both healthy; a kubeadm member fails and the status says so; deleting
// a second kubeadm Machine is refused with the reason; the member recovers; a K3s control-plane
// Machine is deleted and its Node is drained, its member removed and its hook released, in that
// order. At each step it prints the ControlPlaneEtcd table as `kubectl get controlplaneetcds -A`
// shows it (the API server's Table, printed by kubectl's printer) and writes a kubeconfig for
// the management cluster, so a person can look with kubectl meanwhile.
//
// Run returns a Story of what was observed, which the package's test checks.
package demo
