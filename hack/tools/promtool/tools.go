//go:build tools

// Package tools pins promtool's module for `go build github.com/prometheus/prometheus/cmd/promtool`.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
