// Package capi runs Cluster API's own core controllers in-process for the test environment: the
// Machine controller (drain, volume-detach wait, deletion hooks) and the MachineHealthCheck
// controller, connected to workload clusters through Cluster API's ClusterCache, wired the way
// Cluster API's core/main.go wires them. It also finds Cluster API's CRD manifests in the Go
// module cache.
package capi
