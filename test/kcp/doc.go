// Package kcp is the suite that runs Cluster API's real KubeadmControlPlane v1.14.2 beside
// etcd-adapter on the real test environment (test/env/kcp): KCP builds a 3-replica control
// plane from nothing, and etcd-adapter, in Observe mode (the kubeadm backend and
// etcd.AssessHealth), must report the same members and health.
//
// Running: `make test` runs the short version of TestKCPLifecycle (create and compare, about
// 1.5 min on 2 cores). The full flow (MachineHealthCheck remediation, scale 3->1, rollout, with
// per-step KCP times, etcd-adapter's lag and every difference printed with etcd-adapter's
// evidence; about 4 more minutes) runs with
//
//	ETCD_ADAPTER_KCP_FULL=1 make test TEST_PKGS=./test/kcp/...
//
// Add `-args -kcp.log` to a `go test` command line to see the controllers' logs.
package kcp
