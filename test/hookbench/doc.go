// Package hookbench holds the hook-latency benchmark: the etcd-adapter manager, Cluster API's
// Machine controller and one workload cluster per backend (the K3s simulator answering at
// once, and a kubeadm cluster with real etcd behind the port-forward), all on this machine.
//
// It measures what a person deleting a control-plane Machine waits for on etcd-adapter's
// account: the time from the Machine entering WaitingForPreTerminateHook to etcd-adapter
// releasing its hook (member removed by then), and the time from an etcd member failing to
// the ControlPlaneEtcd status saying so. cluster-api-k3s, for comparison, re-checks its
// member removal in 30 s steps.
//
//	make bench-hooks
//
// BenchmarkMemberDeathReplacement measures issue 32's loop per backend: from an etcd member's
// death (its Node stays Ready) through EtcdAdapterMemberHealthy, Cluster API's
// MachineHealthCheck and the owner's deletion, etcd-adapter's hook and the Machine going, to the
// replacement member started and every member a healthy voter again.
//
//	make bench-replacement
package hookbench
