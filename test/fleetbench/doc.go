// Package fleetbench holds the fleet benchmark: the etcd-adapter manager binary, a process of
// its own, against a management cluster and a growing fleet of workload clusters per backend
// (K3s with the K3s simulator, kubeadm with real etcd behind the port-forward). It prints the
// manager's CPU, memory, descriptors and goroutines per fleet size, how fast a member failure
// reaches the ControlPlaneEtcd status, and the estimate for 1,000 clusters on one manager.
//
//	make bench-fleet
//
// TestManagerBesideHostileTenants, which make test runs, uses the same pieces to show the manager
// binary beside a hostile workload cluster: its heap stays flat and a good Cluster's status keeps
// following its etcd.
package fleetbench
