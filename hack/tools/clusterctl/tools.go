//go:build tools

// Package tools pins Cluster API's module for `go build sigs.k8s.io/cluster-api/cmd/clusterctl`.
package tools

import _ "sigs.k8s.io/cluster-api/cmd/clusterctl"
