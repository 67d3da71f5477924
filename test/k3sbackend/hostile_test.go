package k3sbackend_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// hostileNodes is how many etcd-labelled Nodes the hostile workload cluster has, and
// hostileAnnotationBytes the size of the annotation each carries: about 45 MiB of Nodes, which
// the old unbounded list read whole on every observation.
const (
	hostileNodes           = 1500
	hostileAnnotationBytes = 30 << 10
)

// heapInuse is the heap in use after a collection, in bytes.
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestBackend_hostileNodes plays a workload cluster whose admins labelled thousands of Nodes
// etcd servers, each with a large annotation and a long, multi-line EtcdIsVoter message: its
// observation is etcd.ErrTooLarge (condition reason InputTooLarge), the manager's heap stays
// flat, and another Cluster's observation still succeeds.
func TestBackend_hostileNodes(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	good := startCluster(t, profiles[len(profiles)-2], 1, clusterOptions{})

	api, err := env.StartAPIServer(env.APIServerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = api.Stop() })
	createHostileNodes(ctx, g, api, hostileNodes, func(n *corev1.Node) {
		n.Annotations["hostile.example.com/blob"] = strings.Repeat("x", hostileAnnotationBytes)
	})
	hostile, err := k3s.New(k3s.Config{Client: api.Client})
	g.Expect(err).NotTo(HaveOccurred())

	before := heapInuse()
	for range 3 {
		_, err := hostile.Observe(ctx)
		g.Expect(err).To(MatchError(etcd.ErrTooLarge))
		v := etcd.AssessHealth(etcd.HealthInput{ObserveErr: err, Now: time.Now()})
		g.Expect(v.Cluster.Reason).To(Equal(v1alpha1.EtcdClusterInputTooLargeReason), v.Cluster.Message)

		snap, err := good.backend.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred(), "another Cluster's observation fails")
		g.Expect(snap.Members).To(HaveLen(1))
	}
	after := heapInuse()
	grown := int64(after) - int64(before)
	t.Logf("heap in use: %d MiB before, %d MiB after three observations of %d etcd Nodes of %d KiB annotations (%+d KiB)",
		before>>20, after>>20, hostileNodes, hostileAnnotationBytes>>10, grown>>10)
	g.Expect(grown).To(BeNumerically("<", 16<<20), "the manager's heap grew by %d MiB", grown>>20)
	runtime.KeepAlive(hostile)
}

// TestBackend_hostileNodesCached plays the same kind of workload cluster through the backend's
// Node cache (k3s.Start: an informer with k3s.NodeCacheOptions, as the manager's ClusterCache
// has): each of its etcd-labelled Nodes carries many annotations under K3s's, RKE2's and
// etcd-adapter's prefixes, many conditions, owner references and finalizers. The cache keeps
// only what TrimNode keeps of each, so the heap it holds grows by far less than the Nodes weigh,
// and a read through the cache (RemoveMember reads the cache first) is etcd.ErrTooLarge.
func TestBackend_hostileNodesCached(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	api, err := env.StartAPIServer(env.APIServerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = api.Stop() })
	createHostileNodes(ctx, g, api, hostileCachedNodes, addKeptLookalikes)

	before := heapInuse()
	b, err := k3s.Start(ctx, api.Config, k3s.Config{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(b.Stop)
	after := heapInuse()
	grown := int64(after) - int64(before)
	t.Logf("heap in use: %d MiB before, %d MiB after the Node cache synced %d etcd Nodes of %d KiB each (%+d KiB)",
		before>>20, after>>20, hostileCachedNodes, hostileCachedNodeBytes>>10, grown>>10)
	// The Nodes weigh hostileCachedNodes x hostileCachedNodeBytes (about 44 MiB); trimmed, about
	// a KiB each.
	g.Expect(grown).To(BeNumerically("<", 16<<20), "the Node cache holds %d MiB", grown>>20)

	_, err = b.RemoveMember(ctx, etcd.Member{Name: "hostile-0000-0123abcd", NodeName: "hostile-0000"})
	g.Expect(err).To(MatchError(etcd.ErrTooLarge))
	g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("more than %d Nodes labelled", etcd.MaxMembers)))
	runtime.KeepAlive(b)
}

// hostileCachedNodes is how many etcd-labelled Nodes TestBackend_hostileNodesCached's
// workload cluster has, and hostileCachedNodeBytes about what addKeptLookalikes adds to each.
const (
	hostileCachedNodes     = 1500
	hostileCachedNodeBytes = 3*32*(32+maxKeptValueBytes) + 16*512
	maxKeptValueBytes      = 200
)

// addKeptLookalikes adds what TrimNode might keep if it went by prefix or kept every
// condition: 32 annotations under each of K3s's, RKE2's and etcd-adapter's prefixes (values
// shorter than TrimNode's length bound), 16 conditions with 512-byte messages, an owner
// reference and a finalizer.
func addKeptLookalikes(n *corev1.Node) {
	v := strings.Repeat("v", maxKeptValueBytes)
	for i := range 32 {
		for _, prefix := range []string{"etcd.k3s.cattle.io/", "etcd.rke2.cattle.io/", "etcd-adapter.cluster.x-k8s.io/"} {
			n.Annotations[fmt.Sprintf("%shostile-%02d", prefix, i)] = v
		}
	}
	for i := range 16 {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: corev1.NodeConditionType(fmt.Sprintf("Hostile%02d", i)), Status: corev1.ConditionTrue, Message: strings.Repeat("m", 512),
		})
	}
	n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "hostile", UID: "0123"}}
	n.Finalizers = []string{"hostile.example.com/hold"}
}

// createHostileNodes creates count etcd-labelled Nodes carrying K3s's node-name annotation and
// what mutate adds, a few at a time.
func createHostileNodes(ctx context.Context, g Gomega, api *env.APIServer, count int, mutate func(*corev1.Node)) {
	g.Expect(env.CreateEach(ctx, count, func(ctx context.Context, i int) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("hostile-%04d", i),
			Labels:      map[string]string{k3s.EtcdRoleLabel: "true"},
			Annotations: map[string]string{k3s.KeysFor("k3s").NodeName: fmt.Sprintf("hostile-%04d-0123abcd", i)},
		}}
		mutate(n)
		return api.Client.Create(ctx, n)
	})).To(Succeed())
}

func TestTrimNode_bounds(t *testing.T) {
	g := NewWithT(t)
	keys := k3s.KeysFor("k3s")
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "cp-0",
			Labels: map[string]string{k3s.EtcdRoleLabel: "true", "team.example.com/blob": strings.Repeat("x", 63)},
			Annotations: map[string]string{
				keys.NodeName:                  "cp-0-0123abcd",
				keys.NodeAddress:               strings.Repeat("1", etcd.MaxMemberNameBytes+1),
				"team.example.com/blob":        strings.Repeat("x", 100<<10),
				v1alpha1.ReleaseHookAnnotation: "true",
			},
		},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: k3s.EtcdIsVoterCondition, Reason: k3s.ReasonUnhealthy,
			Message: "etcd status check failed\n* Member cp-1: healthy\x1b[0m" + strings.Repeat("y", 100<<10),
		}}},
	}
	out, err := k3s.TrimNode(n)
	g.Expect(err).NotTo(HaveOccurred())
	trimmed := out.(*corev1.Node)
	g.Expect(trimmed.Labels).To(Equal(map[string]string{k3s.EtcdRoleLabel: "true"}))
	g.Expect(trimmed.Annotations).To(Equal(map[string]string{keys.NodeName: "cp-0-0123abcd"}),
		"foreign annotations, etcd-adapter annotations the backend does not read, and over-long values are dropped")
	msg := trimmed.Status.Conditions[0].Message
	g.Expect(len(msg)).To(BeNumerically("<=", etcd.MaxTextBytes))
	g.Expect(msg).To(HavePrefix("etcd status check failed * Member cp-1: healthy [0m"), "one line: no forged line, no escape character")
}
