package k3s

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// BenchmarkObserve_allocs measures the allocations of one Observe of 5 etcd Nodes, the call
// alone: the Nodes are served by a fake client from memory, so no informer, etcd or simulator
// runs in the process during the measurement (BenchmarkObserve5Nodes measures the wall time
// against a real apiserver, where decoding the List adds to this).
func BenchmarkObserve_allocs(b *testing.B) {
	fresh := time.Now().Add(-time.Second)
	var objs []client.Object
	for _, name := range []string{"cp-0", "cp-1", "cp-2", "cp-3", "cp-4"} {
		objs = append(objs, etcdNodeObj(name, "v1.34.2+k3s1", name+"-1a2b3c4d",
			voter(ReasonMemberNotLearner, "Node is a voting member of the etcd cluster", fresh), ready(corev1.ConditionTrue, fresh)))
	}
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	backend, err := New(Config{Client: c})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := backend.Observe(ctx)
		if err != nil || len(s.Members) != 5 {
			b.Fatalf("Observe: %v members, %v", len(s.Members), err)
		}
	}
}
