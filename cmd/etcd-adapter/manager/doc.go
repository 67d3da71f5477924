// Package manager is the etcd-adapter manager behind cmd/etcd-adapter: its flags (the ones
// Cluster API providers use: leader election, diagnostics and health addresses, --namespace,
// --watch-filter, concurrency, webhook serving, client rates, log format and level through
// component-base), and Run, which starts a controller-runtime manager with a ClusterCache, the
// etcd-adapter controllers and the quorum guard webhook, /healthz and /readyz, and etcd-adapter's
// metrics, and returns when its context ends (graceful shutdown). Under leader election only the
// leader runs the controllers, while the ClusterCache connects and the webhooks answer on every
// replica, so that a standby's quorum guard observes etcd as the leader's does.
//
// Run takes the rest.Config explicitly, so the demo, the benchmarks and the tests run the very
// same manager in-process against the test environment; main only parses flags, sets up logging
// and reads the kubeconfig.
package manager
