// Package env builds the project's real test environment from real components: kube-apiserver and
// etcd binaries built by `make envtest-assets`, a management cluster with Cluster API's own
// v1beta2 CRDs and its Machine and MachineHealthCheck controllers running in-process, and
// workload cluster apiservers that the management cluster reaches through `<cluster>-kubeconfig`
// Secrets.
//
// Nothing here is faked: a test that uses this package exercises the same code paths that run in
// a real management cluster, except that Nodes and Pods are plain API objects (no kubelet runs
// unless a test starts the kubelet stand-in from test/env/kubelet).
//
// Running: `make test` builds the binaries once per version (`make envtest-assets`, from the Go
// module proxy into ASSETS_CACHE) and exports KUBEBUILDER_ASSETS. To run one package by hand:
//
//	make envtest-assets
//	KUBEBUILDER_ASSETS=$(hack/build-assets.sh ~/.cache/etcd-adapter/assets) go test ./test/env/ -count=1
//
// Without KUBEBUILDER_ASSETS the default cache directory is used; missing binaries fail the
// test with a hint to run `make envtest-assets`, they never skip it.
//
// kube-apiserver and etcd end with the test process that started them, also when it is killed
// (SIGKILL, a `go test -timeout` panic, a CI time limit): they are started through the
// parent-death wrappers that `make envtest-assets` installs beside them
// (<assets>/parent-death/kube-apiserver and .../etcd, built from hack/tools/parent-death in
// seconds, also into an existing cache), which set a parent-death signal and exec the real
// binary. See test/env/parentdeath.
//
// A typical suite:
//
//	mgmt, _ := env.StartManagement(ctx)               // CAPI CRDs + Machine/MHC controllers
//	wl, _ := env.StartAPIServer(env.APIServerOptions{}) // workload apiserver
//	cluster, _ := env.RegisterCluster(ctx, mgmt.Client, env.ClusterInput{...})
//	m, _ := env.CreateControlPlaneMachine(ctx, mgmt.Client, env.MachineInput{...})
//
// Stop the management cluster before the workload apiservers it watches.
package env
