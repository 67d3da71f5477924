package controlplaneetcd

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// laggingCache is the manager's cached client over an apiserver (live): writes go to the
// apiserver, reads come from a cache that holds what it held at the last catchUp.
type laggingCache struct {
	client.Client // the apiserver, for writes
	cache         client.Client
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.cache.Get(ctx, key, obj, opts...)
}

// catchUp makes the cache hold the apiserver's copy of cpe, at the apiserver's resourceVersion,
// as a watch event would.
func (c *laggingCache) catchUp(ctx context.Context, cpe *v1alpha1.ControlPlaneEtcd) error {
	live := &v1alpha1.ControlPlaneEtcd{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(cpe), live); err != nil {
		return err
	}
	c.cache = fake.NewClientBuilder().WithScheme(eventScheme()).WithObjects(live).WithStatusSubresource(live).Build()
	return nil
}

// countingReader counts the uncached reads.
type countingReader struct {
	client.Reader
	gets int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}

func TestReconciler_read(t *testing.T) {
	ctx := context.Background()
	newCPE := func() *v1alpha1.ControlPlaneEtcd {
		return &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c"}}
	}
	setup := func() (*Reconciler, *countingReader, client.Client) {
		apiserver := fake.NewClientBuilder().WithScheme(eventScheme()).WithObjects(newCPE()).WithStatusSubresource(newCPE()).Build()
		live := &countingReader{Reader: apiserver}
		return &Reconciler{APIReader: live}, live, apiserver
	}
	key := client.ObjectKeyFromObject(newCPE())

	t.Run("the first pass reads uncached", func(t *testing.T) {
		g := NewWithT(t)
		r, live, apiserver := setup()
		r.Client = &laggingCache{Client: apiserver, cache: apiserver}
		cpe, err := r.read(ctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cpe.Name).To(Equal("c"))
		g.Expect(live.gets).To(Equal(1))
	})

	t.Run("a cached copy at the version last read is used; a pass that wrote nothing reads nothing live", func(t *testing.T) {
		g := NewWithT(t)
		r, live, apiserver := setup()
		r.Client = &laggingCache{Client: apiserver, cache: apiserver}
		_, err := r.read(ctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		for range 3 {
			_, err := r.read(ctx, key)
			g.Expect(err).NotTo(HaveOccurred())
		}
		g.Expect(live.gets).To(Equal(1))
	})

	t.Run("after a write the cache has not caught up with, the next pass reads the write", func(t *testing.T) {
		g := NewWithT(t)
		r, live, apiserver := setup()
		lagging := &laggingCache{Client: apiserver}
		r.Client = lagging
		g.Expect(lagging.catchUp(ctx, newCPE())).To(Succeed())

		cpe, err := r.read(ctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		// The pass writes a removal record through Cluster API's patch helper, as Reconcile does.
		helper, err := patch.NewHelper(cpe, r.recording())
		g.Expect(err).NotTo(HaveOccurred())
		cpe.Status.Removal = &v1alpha1.MemberRemovalStatus{MachineName: "m-cp-2", Result: v1alpha1.RemovalInProgress}
		g.Expect(helper.Patch(ctx, cpe)).To(Succeed())
		gets := live.gets

		next, err := r.read(ctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(next.Status.Removal).NotTo(BeNil(), "the pass started from the cache's copy, older than the last write")
		g.Expect(next.Status.Removal.Result).To(Equal(v1alpha1.RemovalInProgress))
		g.Expect(live.gets).To(Equal(gets + 1))

		// Once the cache holds the write, passes read it there again.
		g.Expect(lagging.catchUp(ctx, next)).To(Succeed())
		_, err = r.read(ctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(live.gets).To(Equal(gets + 1))
	})

	t.Run("a write by somebody else, already cached, is read again uncached once", func(t *testing.T) {
		g := NewWithT(t)
		r, live, apiserver := setup()
		r.Client = &laggingCache{Client: apiserver, cache: apiserver}
		_, err := r.read(ctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		other := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(apiserver.Get(ctx, key, other)).To(Succeed())
		other.Labels = map[string]string{"by": "someone-else"}
		g.Expect(apiserver.Update(ctx, other)).To(Succeed())

		cpe, err := r.read(ctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cpe.Labels).To(HaveKeyWithValue("by", "someone-else"))
		g.Expect(live.gets).To(Equal(2))
		_, err = r.read(ctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(live.gets).To(Equal(2))
	})

	t.Run("a copy the cache does not have yet is read uncached; a deleted one is not found", func(t *testing.T) {
		g := NewWithT(t)
		r, live, apiserver := setup()
		empty := fake.NewClientBuilder().WithScheme(eventScheme()).Build()
		r.Client = &laggingCache{Client: apiserver, cache: empty}
		r.versions.Store(key, "1")
		cpe, err := r.read(ctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cpe.Name).To(Equal("c"))
		g.Expect(live.gets).To(Equal(1))

		g.Expect(apiserver.Delete(ctx, cpe)).To(Succeed())
		_, err = r.read(ctx, key)
		g.Expect(err).To(MatchError(ContainSubstring("not found")))
	})
}
