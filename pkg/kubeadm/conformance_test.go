package kubeadm

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/etcdtest"
)

// TestConformance runs the etcd.Cluster conformance suite on the kubeadm backend, through the
// real workload apiserver, kubelet port-forward and TLS etcd.
func TestConformance(t *testing.T) {
	etcdtest.Run(t, harness{})
}

func typesUID(s string) types.UID { return types.UID(s) }
