package env

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// shared is the pair the tests of this package share; sharedPair starts it on first use and
// TestMain stops it after all tests ran.
var shared struct {
	once sync.Once
	p    pair
	err  error
}

// sharedPair returns the package's shared management cluster and workload apiserver, starting
// them on first use (and logging how long that took). Tests isolate themselves with their own
// namespace, Cluster and Node names.
func sharedPair(t *testing.T) pair {
	t.Helper()
	shared.once.Do(func() {
		start := time.Now()
		shared.p, shared.err = startPair(context.Background())
		t.Logf("Started management cluster and workload apiserver in %s", time.Since(start).Round(time.Millisecond))
	})
	NewWithT(t).Expect(shared.err).NotTo(HaveOccurred(), "failed to start the shared environment")
	return shared.p
}

// stopShared stops the shared pair if a test started it.
func stopShared() error {
	if shared.p.mgmt == nil && shared.p.workload == nil {
		return nil
	}
	return shared.p.stop()
}

// startPair starts a workload apiserver and a management cluster.
func startPair(ctx context.Context) (pair, error) {
	var p pair
	var err error
	if p.workload, err = StartAPIServer(APIServerOptions{}); err != nil {
		return p, fmt.Errorf("failed to start the workload apiserver: %w", err)
	}
	if p.mgmt, err = StartManagement(ctx); err != nil {
		return p, errors.Join(fmt.Errorf("failed to start the management cluster: %w", err), p.stop())
	}
	return p, nil
}

// stop stops the management cluster's controllers before the workload apiserver they watch.
func (p pair) stop() error {
	var errs []error
	if p.mgmt != nil {
		errs = append(errs, p.mgmt.Stop())
	}
	if p.workload != nil {
		errs = append(errs, p.workload.Stop())
	}
	return errors.Join(errs...)
}

// createNamespace creates a Namespace with a generated name in the management cluster.
func createNamespace(ctx context.Context, t *testing.T, m *Management) string {
	t.Helper()
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	g.Expect(m.Client.Create(ctx, ns)).To(Succeed())
	return ns.Name
}
