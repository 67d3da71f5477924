// Package k3ssim simulates what K3s (and RKE2) do with Node objects for their embedded etcd,
// against a real workload kube-apiserver and a real etcd cluster, so that the adapter's K3s
// path can be tested without K3s itself.
//
// It is written from K3s's own code paths (k3s-io/k3s pkg/etcd/etcd.go,
// pkg/etcd/member_controller.go, pkg/etcd/metadata_controller.go) and their history
// (history.go: each change with its pull request and the releases it landed on), never from the
// adapter's code, so that a misreading of K3s in one is not copied into the other: the
// metadata controller (node-name/node-address annotations and role labels), the
// EtcdIsVoter Node condition written by the raft leader's process with its heartbeat rule,
// the member controller (removal by the "remove" annotation and the Node-deletion finalizer),
// what happens to a removed server (tombstone, NotReady, rejoin as a learner under a new
// member name) and the leader's learner loop (promotion, removal of stalled learners), each
// per K3s version profile (see ParseProfile and Profile). Servers may run different versions
// (Options.Versions): the etcd leader's version decides how EtcdIsVoter is written, the Lease
// holder's how removals run.
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
// which *etcdcluster.Cluster implements. Fault handles: StopConditionWriter and
// StopConditionWriterFor (stale heartbeat), StopMemberController (removals and Node deletions
// wait), HoldPromotion (a learner stays a learner), RestartServer (rejoin of a removed server,
// or ErrTombstone with Options.TombstoneBlocksRestart), JoinServer / JoinEtcdOnlyServer,
// ChangeAddress (K3s then claims a removal it did not make), ClusterReset, Quiesced (for abrupt
// member kills) and the etcd cluster's own member faults.
package k3ssim
