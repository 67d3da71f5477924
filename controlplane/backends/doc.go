// Package backends keeps one etcd.Cluster per CAPI Cluster for the controllers and the quorum
// guard: kubeadm backends keep their member connections between reconciles, and K3s/RKE2
// backends are attached to the Node informer of CAPI's ClusterCache, so a removal is noticed
// from the watch event rather than a poll.
package backends
