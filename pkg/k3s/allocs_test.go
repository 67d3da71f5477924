package k3s

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkObserve_allocs measures the allocations of one Observe of 5 etcd Nodes, the call
// alone: the Nodes come from memory through a client that only hands out its list (no decoding,
// no deep copy), and no informer, etcd or simulator runs during the measurement.
// BenchmarkObserve5Nodes measures the wall time against a real apiserver, where the client's
// decoding of the List adds to this.
func BenchmarkObserve_allocs(b *testing.B) {
	fresh := time.Now().Add(-time.Second)
	var nodes []corev1.Node
	for _, name := range []string{"cp-0", "cp-1", "cp-2", "cp-3", "cp-4"} {
		nodes = append(nodes, *etcdNodeObj(name, "v1.34.2+k3s1", name+"-1a2b3c4d",
			voter(ReasonMemberNotLearner, "Node is a voting member of the etcd cluster", fresh), ready(corev1.ConditionTrue, fresh)))
	}
	backend, err := New(Config{Client: &nodeLister{nodes: nodes}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N { // b.Loop needs Go 1.24; this module supports 1.23
		s, err := backend.Observe(ctx)
		if err != nil || len(s.Members) != 5 {
			b.Fatalf("Observe: %v members, %v", len(s.Members), err)
		}
	}
}

// nodeLister is a client.Client whose List hands out a fixed NodeList; nothing else is used.
type nodeLister struct {
	client.Client
	nodes []corev1.Node
}

func (l *nodeLister) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*corev1.NodeList).Items = l.nodes
	return nil
}
