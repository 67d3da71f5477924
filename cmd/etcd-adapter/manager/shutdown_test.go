package manager

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// TestControllers_stopWhileReconcilesFail starts controllers configured as the manager
// configures its own, each with two workers whose reconciles all fail (as they do while a
// workload cluster or the management apiserver is unreachable, so every item is retried within
// milliseconds), and stops each while items are being retried. Every controller must stop: a
// controller that does not keeps the manager from stopping within its grace period.
//
// Note: with controller-runtime's default (the priority queue, v0.24.1) a stop hung within the
// first 10 rounds in each of 3 runs on 2 cores (see controllerConfig); with the manager's
// configuration 2,000 rounds took 1.5s.
func TestControllers_stopWhileReconcilesFail(t *testing.T) {
	testControllersStop(t, controllerConfig(&Options{}))
}

func testControllersStop(t *testing.T, cfg config.Controller) {
	g := NewWithT(t)
	const rounds, items = 500, 50
	failing := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, errors.New("workload cluster unreachable")
	})
	for round := range rounds {
		c, err := controller.NewUnmanaged(fmt.Sprintf("stop-%d", round), controller.Options{
			Reconciler: failing, MaxConcurrentReconciles: 10,
			SkipNameValidation: ptr.To(true), UsePriorityQueue: cfg.UsePriorityQueue,
		})
		g.Expect(err).NotTo(HaveOccurred())
		events := make(chan event.GenericEvent, items)
		g.Expect(c.Watch(source.Channel(events, &handler.EnqueueRequestForObject{}))).To(Succeed())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Whether Start returns is the question; what it returns on a cancelled context is not.
			_ = c.Start(ctx)
		}()
		for i := range items {
			events <- event.GenericEvent{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint(i)}}}
		}
		time.Sleep(time.Duration(round%7) * 100 * time.Microsecond)
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the controller did not stop within 10s of its context ending", round)
		}
	}
}
