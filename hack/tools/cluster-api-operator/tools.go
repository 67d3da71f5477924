//go:build tools

// Package tools pins the Cluster API Operator's module for
// `go build sigs.k8s.io/cluster-api-operator/cmd`.
package tools

import _ "sigs.k8s.io/cluster-api-operator/cmd"
