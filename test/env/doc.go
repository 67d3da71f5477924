// Package env builds the project's real test environment from real components: kube-apiserver and
// etcd binaries built by `make envtest-assets`, a management cluster with Cluster API's own
// v1beta2 CRDs and its Machine and MachineHealthCheck controllers running in-process, and
// workload cluster apiservers that the management cluster reaches through `<cluster>-kubeconfig`
// Secrets.
//
// Nothing here is faked: a test that uses this package exercises the same code paths that run in
// a real management cluster, except that Nodes and Pods are plain API objects (no kubelet runs
// unless a test starts the kubelet stand-in from test/env/kubelet).
package env
