package controlplaneetcd

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/external"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// switchableBackends hands out one etcd.Cluster for every Cluster until a test switches it, as
// a restarted manager builds a new backend (with no memory of the cluster ID it saw) for
// endpoints that may now reach other etcd.
type switchableBackends struct {
	mu sync.Mutex
	c  etcd.Cluster
}

func (b *switchableBackends) For(context.Context, *clusterv1.Cluster, v1alpha1.Backend) (etcd.Cluster, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.c, nil
}

func (b *switchableBackends) Forget(types.UID) error { return nil }

func (b *switchableBackends) use(c etcd.Cluster) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.c = c
}

// TestReconciler_clusterIDChanged: two real three-member etcd clusters, A and B, with members
// named alike on Nodes cp-0..cp-2 and one CA (so the client certificate of A's Secret is valid
// for B, as for two Clusters whose etcd one CA signs). The ControlPlaneEtcd records A's cluster
// ID; then a new backend (a restarted manager's) is pointed at B while Machine m-cp-1 is being
// deleted. No member of B is removed and no leadership moved: ClusterIDMatched is False naming
// both IDs, a Warning Event says so, the hook stays. A person's accept-cluster-id annotation
// then records B's ID, with a Warning Event naming who set it, and the removal goes ahead.
func TestReconciler_clusterIDChanged(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := newReconcileEnv(t, g, "cid", false)
	switched := &switchableBackends{}
	e.r.Backends, e.r.Recorder = switched, e.mgmt.events

	a, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: etcdcluster.Nodes("cp", 3)})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = a.Close() })
	// Note: B's strict reconfiguration check is off, so that on code that did not check the
	// cluster ID the removal would not be refused merely because B started a moment ago.
	b, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: etcdcluster.Nodes("cp", 3), CA: a.CA(), DisableStrictReconfigCheck: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Close() })
	aID, err := a.ClusterID(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	bID, err := b.ClusterID(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bID).NotTo(Equal(aID))
	aHex, bHex := strconv.FormatUint(aID, 16), strconv.FormatUint(bID, 16)
	writeEtcdSecrets(ctx, g, e, a)
	backendOf := func(c *etcdcluster.Cluster) etcd.Cluster {
		var endpoints []string
		for _, m := range c.Members() {
			endpoints = append(endpoints, m.ClientURL())
		}
		be, err := external.New(external.Config{Cluster: client.ObjectKeyFromObject(e.cluster), Endpoints: endpoints, Client: e.mgmt.direct, CallTimeout: 3 * time.Second})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = be.Close() })
		return be
	}

	cpe := e.createCPE(g, "cid", v1alpha1.ModeManage)
	for _, node := range []string{"cp-0", "cp-1", "cp-2"} {
		e.createMachine(g, node, false)
	}
	switched.use(backendOf(a))
	e.firstPass(g, cpe)
	e.reconcile(g, cpe)
	e.stored(g, cpe)
	g.Expect(cpe.Status.ClusterID).To(Equal(aHex))
	g.Expect(conditions.Get(cpe, v1alpha1.ClusterIDMatchedCondition)).To(HaveValue(And(HaveField("Status", metav1.ConditionTrue),
		HaveField("Reason", v1alpha1.ClusterIDRecordedReason))))

	doomed := startDeleting(ctx, g, e, "m-cp-1")
	leaderBefore, err := b.Leader()
	g.Expect(err).NotTo(HaveOccurred())
	switched.use(backendOf(b))
	for range 3 {
		e.woken(g, cpe)
		e.reconcile(g, cpe)
	}

	members, err := b.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(members).To(HaveLen(3), "no member of the other etcd is removed")
	leaderAfter, err := b.Leader()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(leaderAfter.Name()).To(Equal(leaderBefore.Name()), "no leadership of the other etcd is moved")
	e.stored(g, doomed)
	g.Expect(doomed.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue))
	e.stored(g, cpe)
	g.Expect(cpe.Status.ClusterID).To(Equal(aHex), "the recorded cluster ID is kept")
	g.Expect(conditions.Get(cpe, v1alpha1.ClusterIDMatchedCondition)).To(HaveValue(And(HaveField("Status", metav1.ConditionFalse),
		HaveField("Reason", v1alpha1.ClusterIDChangedReason), HaveField("Message", ContainSubstring("cluster ID "+bHex+", not "+aHex)))))
	g.Expect(conditions.Get(cpe, v1alpha1.ProgressingCondition)).To(HaveValue(And(HaveField("Reason", v1alpha1.ProgressingRemovalBlockedReason),
		HaveField("Message", ContainSubstring("m-cp-1")))))
	expectEvent(ctx, g, e, And(HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", v1alpha1.EventClusterIDChanged),
		HaveField("InvolvedObject.Name", cpe.Name), HaveField("Message", ContainSubstring(v1alpha1.AcceptClusterIDAnnotation+"="+bHex))))

	before := cpe.DeepCopy()
	cpe.Annotations = map[string]string{v1alpha1.AcceptClusterIDAnnotation: bHex}
	g.Expect(e.mgmt.direct.Patch(ctx, cpe, client.MergeFrom(before), client.FieldOwner("break-glass-kubectl"))).To(Succeed())
	e.cached(g, cpe)
	e.reconcile(g, cpe)
	e.stored(g, cpe)
	g.Expect(cpe.Status.ClusterID).To(Equal(bHex))
	g.Expect(cpe.Annotations).NotTo(HaveKey(v1alpha1.AcceptClusterIDAnnotation))
	expectEvent(ctx, g, e, And(HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", v1alpha1.EventClusterIDAccepted),
		HaveField("Message", ContainSubstring(`field manager "break-glass-kubectl"`))))
	g.Eventually(func() ([]string, error) {
		e.woken(g, cpe)
		e.reconcile(g, cpe)
		ms, err := b.MemberList(ctx)
		var names []string
		for _, m := range ms {
			names = append(names, m.Name)
		}
		return names, err
	}, 2*time.Minute, time.Second).ShouldNot(ContainElement("cp-1"), "once accepted, the removal goes ahead")
}

// writeEtcdSecrets writes the external backend's Secrets for e's Cluster: c's CA certificate and
// its client certificate.
func writeEtcdSecrets(ctx context.Context, g Gomega, e *reconcileEnv, c *etcdcluster.Cluster) {
	kp := c.ClientKeyPair()
	for name, data := range map[string]map[string][]byte{
		external.CASecretName(e.cluster.Name):     {"tls.crt": c.CA().CertPEM()},
		external.ClientSecretName(e.cluster.Name): {"tls.crt": kp.Cert, "tls.key": kp.Key},
	} {
		g.Expect(e.mgmt.direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Data: data})).To(Succeed())
	}
}

// startDeleting deletes Machine name as Cluster API's Machine controller leaves it once drained:
// held by a finalizer and waiting for the pre-terminate hooks.
func startDeleting(ctx context.Context, g Gomega, e *reconcileEnv, name string) *clusterv1.Machine {
	m := &clusterv1.Machine{}
	g.Expect(e.mgmt.direct.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, m)).To(Succeed())
	g.Expect(m.Annotations).To(HaveKey(v1alpha1.PreTerminateHookAnnotation), "the pass before put the hook on")
	m.Finalizers = append(m.Finalizers, "test.etcd-adapter/keep")
	g.Expect(e.mgmt.direct.Update(ctx, m)).To(Succeed())
	conditions.Set(m, metav1.Condition{Type: clusterv1.MachineDeletingCondition, Status: metav1.ConditionTrue,
		Reason: clusterv1.MachineDeletingWaitingForPreTerminateHookReason})
	g.Expect(e.mgmt.direct.Status().Update(ctx, m)).To(Succeed())
	g.Expect(e.mgmt.direct.Delete(ctx, m)).To(Succeed())
	g.Expect(e.mgmt.direct.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	e.cached(g, m)
	return m
}

// expectEvent waits until the apiserver holds an Event of e's namespace that matches.
func expectEvent(ctx context.Context, g Gomega, e *reconcileEnv, match OmegaMatcher) {
	g.Eventually(func() ([]corev1.Event, error) {
		events := &corev1.EventList{}
		err := e.mgmt.direct.List(ctx, events, client.InNamespace(e.ns))
		return events.Items, err
	}, time.Minute, 100*time.Millisecond).Should(ContainElement(match))
}
