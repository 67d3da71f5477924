package controlplaneetcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/external"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// maintenanceQuota is the members' --quota-backend-bytes: small, so that the test fills it in
// seconds; liveData is what the threshold round keeps in the database, so that each
// defragmentation copies that much and the write pauses it causes are measured on it.
const (
	maintenanceQuota = 64 << 20
	liveData         = 24 << 20
)

// oneBackend hands out one real backend for every Cluster.
type oneBackend struct{ backend etcd.Cluster }

func (b oneBackend) For(context.Context, *clusterv1.Cluster, v1alpha1.Backend) (etcd.Cluster, error) {
	return b.backend, nil
}

func (oneBackend) Forget(types.UID) error { return nil }

// writer puts a small key through one member, as the kube-apiserver of a kubeadm control plane
// writes through its own etcd member only (--etcd-servers=https://127.0.0.1:2379), and records
// when each put succeeded.
type writer struct {
	member string
	cli    *clientv3.Client

	mu        sync.Mutex
	last      time.Time
	longest   time.Duration
	successes int
	lastErr   error
}

func (w *writer) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := w.cli.Put(callCtx, fmt.Sprintf("/registry/writer/%s", w.member), fmt.Sprint(i))
		cancel()
		now := time.Now()
		w.mu.Lock()
		if err == nil {
			if !w.last.IsZero() && now.Sub(w.last) > w.longest {
				w.longest = now.Sub(w.last)
			}
			w.last, w.successes = now, w.successes+1
		} else if ctx.Err() == nil {
			w.lastErr = err
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// reset starts a new measurement: the longest pause counts from the next success.
func (w *writer) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last, w.longest, w.successes, w.lastErr = time.Time{}, 0, 0, nil
}

func (w *writer) figures() (time.Duration, int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest, w.successes, w.lastErr
}

// TestMaintenance_NoSpaceOnRealEtcd fills a real three-member TLS etcd (small
// --quota-backend-bytes) until etcd itself refuses writes with NOSPACE, and lets the
// ControlPlaneEtcd controller (spec.maintenance.defragmentation) defragment the members one at a
// time and disarm the alarm, with a writer on every member; then a remediation the alarm blocked
// is allowed and the member removal goes through. A second round fragments the writable cluster
// and lets the free-space threshold defragment it with the writers going, and logs the longest
// write pause each writer saw.
func TestMaintenance_NoSpaceOnRealEtcd(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := newReconcileEnv(t, g, "nospace", false)
	c, backend := startMaintainedEtcd(t, g, e)
	e.r.Backends = oneBackend{backend: backend}

	cpe := &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "nospace"},
		Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: e.cluster.Name, Backend: v1alpha1.BackendExternal, Mode: v1alpha1.ModeObserve,
			Maintenance: &v1alpha1.MaintenanceSpec{Defragmentation: &v1alpha1.DefragmentationSpec{OnNoSpace: ptr.To(true)}}}}
	g.Expect(e.mgmt.direct.Create(ctx, cpe)).To(Succeed())
	e.cached(g, cpe)
	e.firstPass(g, cpe)

	all, err := c.NewClient(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = all.Close() }()
	fillUntilNoSpace(t, g, all)
	g.Eventually(func() []string { return alarmNames(ctx, g, all) }, time.Minute, 100*time.Millisecond).Should(ContainElement("NOSPACE"))

	// The alarm blocks remediation: the gate the hook and the quorum guard use refuses to take
	// out a member that is not alarmed while the alarmed one counts unhealthy.
	snap, err := backend.Observe(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	victim := notAlarmed(g, c, snap)
	g.Expect(etcd.CanRemediate(snap, time.Now(), etcd.Machine{Name: "m-" + victim.Name(), NodeName: victim.Name()}).Allowed).To(BeFalse())

	// The kube-apiserver deletes expired objects and compacts old revisions every
	// --etcd-compaction-interval (k8s.io/apiserver pkg/storage/etcd3/compact.go); etcd takes
	// deletes and compactions under NOSPACE (server/etcdserver/apply.go applierV3Capped refuses
	// puts, leases and txns with puts only). This test does both as the apiserver would; the
	// product never compacts.
	_, err = all.Delete(ctx, "/registry/fill/", clientv3.WithPrefix())
	g.Expect(err).NotTo(HaveOccurred())
	rev, err := all.Get(ctx, "/registry/writer")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = all.Compact(ctx, rev.Header.Revision, clientv3.WithCompactPhysical())
	g.Expect(err).NotTo(HaveOccurred())

	writers := startWriters(t, g, c)
	start := time.Now()
	var lastMsg string
	g.Eventually(func(g Gomega) {
		_, err := e.r.Reconcile(ctx, requestFor(cpe))
		g.Expect(err).NotTo(HaveOccurred())
		if msg := storedMaintenanceMessage(e, cpe); msg != lastMsg {
			t.Logf("%s: %s", time.Since(start).Round(time.Millisecond), msg)
			lastMsg = msg
		}
		g.Expect(alarmNames(ctx, g, all)).To(BeEmpty())
	}, 3*time.Minute, 200*time.Millisecond).Should(Succeed())
	t.Logf("NOSPACE recovered in %s", time.Since(start).Round(time.Millisecond))
	logMaintenanceEvents(t, e.recorder)

	got := &v1alpha1.ControlPlaneEtcd{}
	g.Expect(e.mgmt.direct.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
	g.Expect(got.Status.Maintenance).NotTo(BeNil())
	g.Expect(got.Status.Maintenance.LastNoSpaceDisarmTime).NotTo(BeNil())
	expectDefragmentedOnce(g, got.Status.Maintenance.Defragmentations, c, v1alpha1.DefragmentationReasonNoSpace)
	for _, m := range c.Members() {
		g.Expect(e.recorder.events).To(ContainElement(And(matchEvent(corev1.EventTypeNormal, v1alpha1.EventMemberDefragmented, v1alpha1.ControlPlaneEtcdKind, cpe.Name),
			HaveField("Message", And(ContainSubstring("Defragmented etcd member "+m.Name()), ContainSubstring("before"), ContainSubstring("after"))))))
	}
	g.Expect(e.recorder.events).To(ContainElement(matchEvent(corev1.EventTypeNormal, v1alpha1.EventNoSpaceDisarmed, v1alpha1.ControlPlaneEtcdKind, cpe.Name)))

	// Writable again through every member.
	for _, w := range writers {
		w.reset()
	}
	for _, w := range writers {
		g.Eventually(func() int { _, n, _ := w.figures(); return n }, time.Minute, 50*time.Millisecond).Should(BeNumerically(">", 0), w.member)
	}

	fragmentRound(t, g, e, cpe, all, c, writers)

	// The remediation the alarm blocked is allowed now, and the member removal goes through.
	snap, err = backend.Observe(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	verdict := etcd.CanRemediate(snap, time.Now(), etcd.Machine{Name: "m-" + victim.Name(), NodeName: victim.Name()})
	g.Expect(verdict.Allowed).To(BeTrue(), verdict.Message)
	target, ok := snap.MemberByNode(victim.Name())
	g.Expect(ok).To(BeTrue())
	g.Eventually(func(g Gomega) {
		r, err := backend.RemoveMember(ctx, target)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
	}, time.Minute, time.Second).Should(Succeed())
}

// fragmentRound fragments every member (writes, then deletes and a compaction, as the
// apiserver's do) and lets the free-space threshold defragment them with the writers going.
func fragmentRound(t *testing.T, g *WithT, e *reconcileEnv, cpe *v1alpha1.ControlPlaneEtcd, all *clientv3.Client, c *etcdcluster.Cluster, writers []*writer) {
	ctx := context.Background()
	got := &v1alpha1.ControlPlaneEtcd{}
	g.Expect(e.mgmt.direct.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
	got.Spec.Maintenance.Defragmentation.FreeBytesThreshold = ptr.To(resource.MustParse("4Mi"))
	g.Expect(e.mgmt.direct.Update(ctx, got)).To(Succeed())
	e.cached(g, got)
	before := len(got.Status.Maintenance.Defragmentations)

	value := strings.Repeat("x", 256<<10)
	for i := range liveData / len(value) {
		_, err := all.Put(ctx, fmt.Sprintf("/registry/live/%d", i), value)
		g.Expect(err).NotTo(HaveOccurred())
	}
	for i := range 24 {
		_, err := all.Put(ctx, fmt.Sprintf("/registry/churn/%d", i), value)
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err := all.Delete(ctx, "/registry/churn/", clientv3.WithPrefix())
	g.Expect(err).NotTo(HaveOccurred())
	rev, err := all.Get(ctx, "/registry/writer")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = all.Compact(ctx, rev.Header.Revision, clientv3.WithCompactPhysical())
	g.Expect(err).NotTo(HaveOccurred())

	for _, w := range writers {
		w.reset()
	}
	start := time.Now()
	g.Eventually(func(g Gomega) {
		_, err := e.r.Reconcile(ctx, requestFor(cpe))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(e.mgmt.direct.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
		g.Expect(len(got.Status.Maintenance.Defragmentations) - before).To(BeNumerically(">=", len(c.Members())))
	}, 3*time.Minute, 200*time.Millisecond).Should(Succeed())
	took := time.Since(start)
	expectDefragmentedOnce(g, got.Status.Maintenance.Defragmentations[before:], c, v1alpha1.DefragmentationReasonFreeSpace)
	for _, r := range got.Status.Maintenance.Defragmentations[before:] {
		t.Logf("defragmented %s in %s: %d -> %d bytes (%d -> %d in use)", r.Member, r.Duration.Round(time.Millisecond),
			r.DBSizeBefore, *r.DBSizeAfter, r.DBSizeInUseBefore, *r.DBSizeInUseAfter)
	}
	for _, w := range writers {
		longest, n, lastErr := w.figures()
		t.Logf("writer through %s: longest write pause %s over %s of threshold defragmentation, %d writes, last error: %v",
			w.member, longest.Round(time.Millisecond), took.Round(time.Millisecond), n, lastErr)
		g.Expect(n).To(BeNumerically(">", 0), w.member)
	}
}

// expectDefragmentedOnce checks that every member was defragmented with the reason, and left
// smaller than it was.
func expectDefragmentedOnce(g *WithT, recs []v1alpha1.DefragmentationRecord, c *etcdcluster.Cluster, reason string) {
	var names []string
	for _, r := range recs {
		g.Expect(r.Error).To(BeEmpty())
		g.Expect(r.Reason).To(Equal(reason))
		g.Expect(r.DBSizeAfter).NotTo(BeNil())
		g.Expect(*r.DBSizeAfter).To(BeNumerically("<", r.DBSizeBefore), r.Member)
		names = append(names, r.Member)
	}
	for _, m := range c.Members() {
		g.Expect(names).To(ContainElement(m.Name()))
	}
}

func requestFor(cpe *v1alpha1.ControlPlaneEtcd) ctrl.Request {
	return ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cpe)}
}

// startMaintainedEtcd starts three real TLS members with a small quota, writes the Secrets the
// external backend reads into the test's namespace, and returns the backend.
func startMaintainedEtcd(t *testing.T, g *WithT, e *reconcileEnv) (*etcdcluster.Cluster, *external.Backend) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: etcdcluster.Nodes("etcd", 3), QuotaBackendBytes: maintenanceQuota})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Close() })
	kp := c.ClientKeyPair()
	for name, data := range map[string]map[string][]byte{
		external.CASecretName(e.cluster.Name):     {"tls.crt": c.CA().CertPEM()},
		external.ClientSecretName(e.cluster.Name): {"tls.crt": kp.Cert, "tls.key": kp.Key},
	} {
		g.Expect(e.mgmt.direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Data: data})).To(Succeed())
	}
	var endpoints []string
	for _, m := range c.Members() {
		endpoints = append(endpoints, m.ClientURL())
	}
	b, err := external.New(external.Config{Cluster: client.ObjectKey{Namespace: e.ns, Name: e.cluster.Name}, Endpoints: endpoints, Client: e.mgmt.direct})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Close() })
	return c, b
}

// fillUntilNoSpace writes 256 KiB values until etcd refuses with its own
// "etcdserver: mvcc: database space exceeded" (rpctypes.ErrNoSpace): etcd raised NOSPACE.
func fillUntilNoSpace(t *testing.T, g *WithT, cli *clientv3.Client) {
	value := strings.Repeat("v", 256<<10)
	for i := 0; ; i++ {
		g.Expect(i).To(BeNumerically("<", 4*maintenanceQuota/len(value)), "etcd never refused a write")
		_, err := cli.Put(context.Background(), fmt.Sprintf("/registry/fill/%d", i), value)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			t.Logf("etcd refused write %d: %v", i, err)
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
	}
}

func alarmNames(ctx context.Context, g Gomega, cli *clientv3.Client) []string {
	resp, err := cli.AlarmList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, a := range resp.Alarms {
		out = append(out, a.Alarm.String())
	}
	return out
}

// startWriters starts one writer per member, through that member only.
func startWriters(t *testing.T, g *WithT, c *etcdcluster.Cluster) []*writer {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var out []*writer
	for _, m := range c.Members() {
		cli, err := m.NewClient(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = cli.Close() })
		w := &writer{member: m.Name(), cli: cli}
		out = append(out, w)
		wg.Go(func() { w.run(ctx) })
	}
	return out
}

// notAlarmed is a member no alarm names (the last one when every member is alarmed).
func notAlarmed(g *WithT, c *etcdcluster.Cluster, snap *etcd.Snapshot) *etcdcluster.Member {
	g.Expect(snap.Alarms).NotTo(BeEmpty())
	for _, m := range c.Members() {
		if !slices.ContainsFunc(snap.Alarms, func(a etcd.ActiveAlarm) bool { return a.MemberID == m.ID() }) {
			return m
		}
	}
	return c.Members()[len(c.Members())-1]
}

func storedMaintenanceMessage(e *reconcileEnv, cpe *v1alpha1.ControlPlaneEtcd) string {
	got := &v1alpha1.ControlPlaneEtcd{}
	if err := e.mgmt.direct.Get(context.Background(), client.ObjectKeyFromObject(cpe), got); err != nil || got.Status.Maintenance == nil {
		return ""
	}
	return got.Status.Maintenance.Message
}

func logMaintenanceEvents(t *testing.T, r *eventRecorder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		t.Logf("Event %s %s: %s", ev.Type, ev.Reason, ev.Message)
	}
}
