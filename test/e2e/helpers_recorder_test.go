package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

// step is one recorded change in a workload cluster, ordered by the resourceVersion the
// workload apiserver's storage gave it: Pods and Nodes live in the same storage, so their
// revisions order the changes as they happened.
type step struct {
	rv   int64
	what string // "evicted" or "removal-requested"
	node string
}

// recorder watches a workload cluster's Pods and Nodes and records, per Node, when its Pods were
// evicted and when the removal of its member was asked for.
type recorder struct {
	mu    sync.Mutex
	steps []step
	seen  map[string]bool
}

func startRecorder(ctx context.Context, cfg *rest.Config) *recorder {
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	r := &recorder{seen: map[string]bool{}}
	pods, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	nodes, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	go r.consume(pods, r.pod)
	go r.consume(nodes, r.nodeEvent)
	return r
}

func (r *recorder) consume(w watch.Interface, fn func(watch.Event)) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		fn(ev)
	}
}

func (r *recorder) pod(ev watch.Event) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok || p.Namespace != "default" {
		return
	}
	if ev.Type == watch.Deleted || p.DeletionTimestamp != nil {
		r.add("evicted", p.Spec.NodeName, p.ResourceVersion)
	}
}

func (r *recorder) nodeEvent(ev watch.Event) {
	n, ok := ev.Object.(*corev1.Node)
	if !ok {
		return
	}
	keys := k3s.KeysFor("k3s")
	if n.Annotations[keys.Remove] == "true" || n.Annotations[v1alpha1.K3sRemovingMemberAnnotation] != "" {
		r.add("removal-requested", n.Name, n.ResourceVersion)
	}
}

// add records the first occurrence of what on node.
func (r *recorder) add(what, node, rv string) {
	v, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := what + "/" + node
	if r.seen[key] {
		return
	}
	r.seen[key] = true
	r.steps = append(r.steps, step{rv: v, what: what, node: node})
}

// order returns the recorded steps of node, oldest first, as "what" strings.
func (r *recorder) order(node string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var mine []step
	for _, s := range r.steps {
		if s.node == node {
			mine = append(mine, s)
		}
	}
	slices.SortFunc(mine, func(a, b step) int { return int(a.rv - b.rv) })
	out := make([]string, 0, len(mine))
	for _, s := range mine {
		out = append(out, s.what)
	}
	return out
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.steps)
}
