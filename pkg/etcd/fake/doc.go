// Package fake provides an in-memory etcd.Cluster for unit tests of code that consumes the
// interface (controllers, providers). It decides nothing; tests set its answers and read back the
// calls it received. Behaviour an issue promises is tested against real components instead.
package fake
