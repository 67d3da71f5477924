package kubeadm

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// hostileNodeAnnotationBytes is the annotation each of the hostile workload cluster's Nodes
// carries, so that the Nodes weigh more than their names.
const hostileNodeAnnotationBytes = 2 << 10

// Test_listNodes_hostile: a workload cluster with more Nodes than maxNodes, each with a 2 KiB
// annotation, is etcd.ErrTooLarge; the Nodes are read a page of nodePageSize at a time, so the
// manager's heap stays flat over three listings.
func Test_listNodes_hostile(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	api, err := env.StartAPIServer(env.APIServerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = api.Stop() })
	createNodes(ctx, g, api.Client, maxNodes+1)
	b, err := New(Config{Cluster: client.ObjectKey{Namespace: "default", Name: "hostile"}, RESTConfig: StaticRESTConfig(api.Config), Client: api.Client})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Close() })

	before := heapInuse()
	for range 3 {
		var h nodeFacts
		err := b.listNodes(ctx, &h)
		g.Expect(err).To(MatchError(etcd.ErrTooLarge))
		g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("more than %d Nodes", maxNodes)))
	}
	after := heapInuse()
	grown := int64(after) - int64(before)
	t.Logf("heap in use: %d MiB before, %d MiB after three listings of %d Nodes with %d KiB annotations (%+d KiB)",
		before>>20, after>>20, maxNodes+1, hostileNodeAnnotationBytes>>10, grown>>10)
	g.Expect(grown).To(BeNumerically("<", 16<<20), "the manager's heap grew by %d MiB", grown>>20)
	runtime.KeepAlive(b)
}

// createNodes creates n Nodes with a large annotation, eight at a time.
func createNodes(ctx context.Context, g Gomega, c client.Client, n int) {
	annotation := strings.Repeat("x", hostileNodeAnnotationBytes)
	next := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n-%05d", i), Annotations: map[string]string{"example.com/hostile": annotation}}}
				if err := c.Create(ctx, node); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	g.Expect(<-errs).NotTo(HaveOccurred())
}
