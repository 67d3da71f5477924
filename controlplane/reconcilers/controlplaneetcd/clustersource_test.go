package controlplaneetcd

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Test_readToTheEnd starts the source the ClusterCache gives a consumer (a channel source on the
// channel it sends to, as clustercache.GetClusterSource builds it), stops the controller (its
// context ends, its queue shuts down) and then sends as the ClusterCache does: the send must
// not block. Started as is (without readToTheEnd), the first send after the stop blocked.
func Test_readToTheEnd(t *testing.T) {
	g := NewWithT(t)
	ch := make(chan event.GenericEvent) // unbuffered, as the ClusterCache's
	src := readToTheEnd{Source: source.Channel(ch, &handler.EnqueueRequestForObject{})}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	ctx, cancel := context.WithCancel(context.Background())
	g.Expect(src.Start(ctx, queue)).To(Succeed())

	cluster := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	sent := func() bool {
		select {
		case ch <- event.GenericEvent{Object: cluster}:
			return true
		case <-time.After(5 * time.Second):
			return false
		}
	}
	g.Expect(sent()).To(BeTrue())
	g.Eventually(queue.Len).WithTimeout(10 * time.Second).Should(Equal(1))

	cancel()
	queue.ShutDown()
	for range 3 {
		g.Expect(sent()).To(BeTrue(), "a ClusterCache event sent after the controller stopped must not block")
	}
}
