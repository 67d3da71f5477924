// Package kubelet is a kubelet stand-in for test environments: one per Node of a workload
// cluster, against that cluster's real kube-apiserver.
//
// It does the parts of a kubelet that Cluster API and the etcd adapter observe: it registers
// the Node and keeps its Ready condition fresh, finishes the graceful deletion of Pods bound to
// the Node, reports those Pods Running and Ready, and serves the kubelet's port-forward
// endpoint, so that `pods/<pod>/portforward` through the apiserver reaches a real address (for
// an etcd Pod: the Node's etcd member). It serves the containers' logs SetLog gives to
// `pods/<pod>/log` (kubectl logs). Fault handles stop it, mark the Node not ready, make
// port-forward refuse, and retarget port-forward to another address (split brain).
//
// How the apiserver reaches it: the Node's only address is InternalIP 127.0.0.1 and its
// status.daemonEndpoints.kubeletEndpoint.port is the stand-in's TLS port, so the apiserver's
// default --kubelet-preferred-address-types resolve to 127.0.0.1:<port>. The apiserver does
// not verify the kubelet's serving certificate unless --kubelet-certificate-authority is set
// (envtest does not set it), so a self-signed certificate does.
package kubelet
