// Package e2e is the end-to-end suite of the etcd-adapter controllers (Ginkgo v2), on the real
// test environment: a management apiserver with Cluster API's own Machine and
// MachineHealthCheck controllers, the etcd-adapter controllers and webhooks (quorum guard,
// Machine hook) in a manager of their own (so tests can stop and restart them, or run the
// webhooks alone), and workload clusters of either flavour (test/env/workload) with real etcd
// members.
//
// The etcd-adapter manager runs as its ServiceAccount bound to the generated ClusterRole
// (config/rbac/role.yaml), and every request it sends to the management apiserver is recorded.
// After the suite, each recorded request must be allowed by the role, and, when the whole suite
// ran, each grant of the role must have been used (see helpers_rbac_test.go and test/rbaccheck).
//
// It is its own package so it can be run alone:
//
//	make test TEST_PKGS=./test/e2e
//
// The suite prints its duration at the end.
package e2e
