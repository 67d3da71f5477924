package env

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pair is a management cluster and one workload apiserver, the shape every etcd-adapter suite
// starts from.
type pair struct {
	mgmt     *Management
	workload *APIServer
}

// startPair starts a management cluster and a workload apiserver, stops both when the test ends
// and logs how long starting took.
func startPair(ctx context.Context, t *testing.T) pair {
	t.Helper()
	g := NewWithT(t)
	start := time.Now()
	workload, err := StartAPIServer(APIServerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { stopAndLog(t, "workload apiserver", workload.Stop) })
	workloadTook := time.Since(start)
	// Cleanups run last-in first-out: the management cluster's controllers stop before the
	// workload apiserver they watch.
	mgmt, err := StartManagement(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { stopAndLog(t, "management cluster", mgmt.Stop) })
	t.Logf("Started management cluster (apiserver, CRDs, controllers) in %s and workload apiserver in %s (total %s)",
		(time.Since(start) - workloadTook).Round(time.Millisecond), workloadTook.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	return pair{mgmt: mgmt, workload: workload}
}

// createNamespace creates a Namespace with a generated name in the management cluster.
func createNamespace(ctx context.Context, t *testing.T, m *Management) string {
	t.Helper()
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	g.Expect(m.Client.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// stopAndLog calls stop and logs how long it took.
func stopAndLog(t *testing.T, what string, stop func() error) {
	t.Helper()
	start := time.Now()
	NewWithT(t).Expect(stop()).To(Succeed())
	t.Logf("Stopped %s in %s", what, time.Since(start).Round(time.Millisecond))
}
