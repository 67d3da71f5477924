// Package quorumguard is a validating admission webhook on DELETE of control-plane Machines: it
// refuses a deletion whose etcd member removal the quorum projection says would lose quorum, with
// the members and the numbers in the message, for Clusters that have a ControlPlaneEtcd (in
// either mode). It lets the deletion through when the Cluster or its control plane is being
// deleted, when the Machine carries v1alpha1.SkipQuorumGuardAnnotation, and when etcd health is
// unknown (with an admission warning that says so): the guard must never be the reason a broken
// cluster cannot be repaired. Every refusal and every deletion let through with a warning is
// also a Warning Event, with a v1alpha1 reason and the client's message, on the Machine and on
// the ControlPlaneEtcd (none for a dry run).
package quorumguard
