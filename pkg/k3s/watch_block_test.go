package k3s

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The ClusterCache calls a Watcher holding the Cluster's lock; a Watch that waits for the Node
// informer's first list would hold it for as long as the workload apiserver does not answer.
func TestWatcher_doesNotWaitForSync(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Node"), meta.RESTScopeRoot)
	// Nothing listens there: the informer's list fails for as long as the test runs.
	c, err := ctrlcache.New(&rest.Config{Host: "https://127.0.0.1:1"}, ctrlcache.Options{Scheme: scheme, Mapper: mapper})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Start(ctx) }()

	// The Backend's client is not used: only its Watcher is.
	b, err := New(Config{Client: fake.NewClientBuilder().Build(), Reader: c})
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	go func() { done <- b.Watcher().Watch(c) }()
	// Note: not a speed goal. The old Watch never returned here; 30 s is for a loaded machine.
	var got error
	g.Eventually(done, 30*time.Second).Should(Receive(&got))
	g.Expect(got).NotTo(HaveOccurred())
	g.Expect(b.notes.watching()).To(BeTrue())
}
