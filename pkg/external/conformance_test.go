package external

import (
	"testing"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/etcdtest"
)

// TestConformance runs the etcd.Cluster conformance suite on the external backend, dialling
// real TLS etcd members directly.
func TestConformance(t *testing.T) {
	etcdtest.Run(t, harness{})
}
