// Package k3ssim simulates what K3s (and RKE2) do with Node objects for their embedded etcd,
// against a real workload kube-apiserver and a real etcd cluster, so that the adapter's K3s
// path can be tested without K3s itself.
//
// It follows /work/shared/reference/k3s-etcd-contract.md ("the contract") line by line:
// the metadata controller (node-name/node-address annotations and role labels), the
// EtcdIsVoter Node condition written by the raft leader's process with its heartbeat rule,
// the member controller (removal by the "remove" annotation and the Node-deletion finalizer),
// what happens to a removed server (tombstone, NotReady, rejoin as a learner under a new
// member name) and the leader's learner loop (promotion, removal of stalled learners), each
// per K3s version profile (see ParseProfile and Profile).
//
// Usage, with the test environment's etcd cluster (members named `<node>-<8 hex>`):
//
//	cluster, _ := etcdcluster.Start(ctx, etcdcluster.Options{Members: specs})
//	sim, _ := k3ssim.New(k3ssim.Options{
//		Version: "v1.33.4+k3s1", RESTConfig: workload.Config, Etcd: cluster,
//		Tick: 250 * time.Millisecond, // K3s: 15 s
//	})
//	_ = sim.Start(ctx) // registers and annotates one Node per member
//	defer sim.Stop()
//
// The simulator owns no etcd: it drives the cluster through the small EtcdCluster interface,
// which *etcdcluster.Cluster implements. Fault handles: StopConditionWriter (stale
// heartbeat), StopMemberController (removals and Node deletions wait), HoldPromotion (a learner stays a learner),
// RestartServer (rejoin of a removed server) and the etcd cluster's own member faults.
package k3ssim
