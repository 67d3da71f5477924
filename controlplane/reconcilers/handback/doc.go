// Package handback takes etcd-adapter's pre-terminate hook off control-plane Machines of a
// Cluster that no ControlPlaneEtcd manages any more: its ControlPlaneEtcd was deleted (a person
// opting the Cluster out deletes it after setting the opt-out annotation) and the Cluster gets
// none by default, so no removal flow will ever release the hook. Machines of a Cluster whose
// ControlPlaneEtcd exists are left to the ControlPlaneEtcd controller, which hands them back
// itself outside Manage mode. It also takes etcd-adapter's EtcdAdapterMemberHealthy condition off
// the Machines of a Cluster no ControlPlaneEtcd is in charge of, in any mode: nothing keeps it
// current there.
package handback
