// Package quorumguard is a validating admission webhook on DELETE of control-plane Machines: it
// refuses a deletion whose etcd member removal the quorum projection says would lose quorum, with
// the members and the numbers in the message, for Clusters that have a ControlPlaneEtcd (in
// either mode).
//
// Each deletion is projected together with the deletions already under way: the members of every
// control-plane Machine the apiserver shows deleting (read uncached, oldest deletion first, the
// order the deletion hook removes them in) and of every Machine whose deletion a replica of the
// guard admitted but the apiserver does not show yet (admission comes before the write), then the
// members of the Machine asked about, one after the other (etcd.CanRemoveMachines). A Machine's
// members are projected as removed only when a hook removes them before Cluster API deletes its
// infrastructure (etcd-adapter's own in mode Manage, KubeadmControlPlane's kcp-cleanup,
// cluster-api-provider-rke2's rke2-cleanup, cluster-api-k3s's hook); otherwise they stay voters
// that stop answering (see memberRemover). The deletion that would remove the last etcd member of
// a Cluster that is not being deleted is refused.
//
// Admissions of one Cluster are decided one at a time across replicas, so two DELETEs racing on
// the same observation cannot both pass: each admission is written to a Lease per Cluster
// (admissionRecord) under the resourceVersion it was decided on before it is answered, and a
// replica that lost the race decides again on the new record. A record that cannot be read or
// written refuses the deletion.
//
// It lets the deletion through unchecked when the Cluster or its control-plane object is being
// deleted, when the Cluster is paused, when clusterctl move deletes the Machine
// (v1alpha1.DeleteForMoveAnnotation), and when the Machine carries
// v1alpha1.SkipQuorumGuardAnnotation with the value v1alpha1.AnnotationTrue; and it lets it
// through with an admission warning when etcd cannot be observed: the guard must never be the
// reason a broken cluster cannot be repaired. When whether healthy voters are a majority depends
// on members whose health is Unknown it refuses, saying unknown (HealthUnknown), never "lost". Every refusal and every deletion
// let through with a warning is also a Warning Event, with a v1alpha1 reason and the client's
// message, on the Machine and on the ControlPlaneEtcd (none for a dry run, which is also never
// counted as a deletion under way).
//
// guard.go is the webhook (setup, decoding, the answer and its Events); exemptions.go says which
// deletions go through unchecked; turn.go decides one deletion of a Cluster at a time and writes
// its admission (record.go is the Lease); projection.go asks the quorum projection.
package quorumguard
