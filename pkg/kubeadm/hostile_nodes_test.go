package kubeadm

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm/internal/portforward"
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

// Test_listEtcdPods_hostile: a workload cluster with thousands of Pods labelled as kubeadm's etcd
// and named etcd-<node>, each with a 16 KiB annotation, is etcd.ErrTooLarge; one list of
// etcd.MaxMembers+1 Pods is read, no member is asked (no port-forward is opened), and the
// manager's heap stays flat over three observations' worth of asking.
func Test_listEtcdPods_hostile(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	api, err := env.StartAPIServer(env.APIServerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = api.Stop() })
	const pods = 2_000
	createEtcdPods(ctx, g, api.Client, pods)

	var portForwards atomic.Int32
	cfg := rest.CopyConfig(api.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if strings.HasSuffix(req.URL.Path, "/portforward") {
				portForwards.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	b, err := New(Config{Cluster: testCluster, RESTConfig: StaticRESTConfig(cfg), Client: api.Client})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Close() })
	creds, _, err := sourceFor([]client.Object{caSecretFor(g)}).get(ctx, time.Now())
	g.Expect(err).NotTo(HaveOccurred())

	before := heapInuse()
	for range 3 {
		answers, _, err := b.askMembers(ctx, creds)
		g.Expect(err).To(MatchError(etcd.ErrTooLarge))
		g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("more than %d etcd Pods", etcd.MaxMembers)))
		g.Expect(answers).To(BeEmpty())
	}
	after := heapInuse()
	grown := int64(after) - int64(before)
	t.Logf("heap in use: %d MiB before, %d MiB after three observations of %d etcd Pods with %d KiB annotations (%+d KiB)",
		before>>20, after>>20, pods, hostileEtcdPodAnnotationBytes>>10, grown>>10)
	g.Expect(grown).To(BeNumerically("<", 16<<20), "the manager's heap grew by %d MiB", grown>>20)
	g.Expect(portForwards.Load()).To(BeZero(), "no etcd Pod's member is asked")
	runtime.KeepAlive(b)
}

// hostileEtcdPodAnnotationBytes is the annotation each of the hostile workload cluster's etcd
// Pods carries.
const hostileEtcdPodAnnotationBytes = 16 << 10

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// createNodes creates n Nodes with a large annotation, eight at a time.
func createNodes(ctx context.Context, g Gomega, c client.Client, n int) {
	annotation := strings.Repeat("x", hostileNodeAnnotationBytes)
	g.Expect(env.CreateEach(ctx, n, func(ctx context.Context, i int) error {
		return c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n-%05d", i), Annotations: map[string]string{"example.com/hostile": annotation}}})
	})).To(Succeed())
}

// createEtcdPods creates n Pods in kube-system with the labels of kubeadm's etcd static Pod,
// each named etcd-<node> of its Node's name and with a large annotation, eight at a time.
func createEtcdPods(ctx context.Context, g Gomega, c client.Client, n int) {
	annotation := strings.Repeat("x", hostileEtcdPodAnnotationBytes)
	g.Expect(env.CreateEach(ctx, n, func(ctx context.Context, i int) error {
		node := fmt.Sprintf("n-%05d", i)
		return c.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: metav1.NamespaceSystem, Name: portforward.PodName(node),
				Labels:      map[string]string{"component": "etcd", "tier": "control-plane"},
				Annotations: map[string]string{"example.com/hostile": annotation},
			},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.14-0"}}},
		})
	})).To(Succeed())
}
