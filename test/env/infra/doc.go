// Package infra is the test environment's own infrastructure provider: a TestMachine kind that
// follows Cluster API's v1beta2 InfraMachine contract (spec.providerID,
// status.initialization.provisioned) and a reconciler that provisions it at once and lets it go
// on deletion. It stands in for a cloud so that Cluster API's Machine controller can create and
// delete Machines against real workload Nodes.
package infra
