// Package e2e is the end-to-end suite of the etcd-adapter controllers (Ginkgo v2), on the real
// test environment: a management apiserver with Cluster API's own Machine and
// MachineHealthCheck controllers, the etcd-adapter controllers and quorum guard webhook in a
// manager of their own (so tests can stop and restart them), and workload clusters of either
// flavour (test/env/workload) with real etcd members.
//
// It is its own package so it can be run alone:
//
//	make test TEST_PKGS=./test/e2e
//
// The suite prints its duration at the end.
package e2e
