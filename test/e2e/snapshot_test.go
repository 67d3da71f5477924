package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/snapshotstore"
	"github.com/etcd-adapter/etcd-adapter/test/env/k3ssim"
	"github.com/etcd-adapter/etcd-adapter/test/env/s3server"
)

var _ = Describe("A verified snapshot before a member removal (spec.snapshot)", func() {
	It("holds an etcd Machine's member removal while the bucket is down, and removes it once the bucket is back, preceded by a verified snapshot in the bucket", func(ctx SpecContext) {
		const bucket = "etcd-snapshots"
		s3, err := s3server.Start(bucket)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(s3.Close)
		s3.SetDown(true)
		e := startManagedEtcdadm(ctx, "eadm-snap", []string{"127.0.0.74", "127.0.0.75", "127.0.0.76"}, nil)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.cpe.Namespace, Name: "eadm-snap-s3"},
			Data: map[string][]byte{v1alpha1.SnapshotAccessKeyIDKey: []byte(s3server.AccessKeyID), v1alpha1.SnapshotSecretAccessKeyKey: []byte(s3server.SecretAccessKey)}}
		Expect(mgmt.Client.Create(ctx, secret)).To(Succeed())
		cpe := e.status(ctx)
		before := cpe.DeepCopy()
		cpe.Spec.Snapshot = &v1alpha1.SnapshotSpec{Endpoint: s3.URL, Bucket: bucket, Prefix: "fleet/",
			CredentialsSecretRef: &corev1.LocalObjectReference{Name: secret.Name}}
		Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(before))).To(Succeed())
		a, id := e.machines[0], e.etcd.Members()[0].ID()

		By("the bucket is down: the removal waits with Progressing WaitingForSnapshot, a SnapshotFailed Event, and the member stays")
		Expect(deleteMachine(ctx, a)).To(BeEmpty())
		Eventually(func(g Gomega) {
			got := e.status(ctx)
			cond := findCondition(got, v1alpha1.ProgressingCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(v1alpha1.ProgressingWaitingForSnapshotReason), cond.Message)
			g.Expect(got.Status.Snapshot).NotTo(BeNil())
			g.Expect(got.Status.Snapshot.LastError).NotTo(BeEmpty())
			var reasons []string
			for _, ev := range eventsAbout(ctx, a) {
				reasons = append(reasons, ev.Reason)
			}
			g.Expect(reasons).To(ContainElement(v1alpha1.EventSnapshotFailed))
		}, deletionTimeout).Should(Succeed())
		Expect(e.memberIDs(ctx, Default, 1)).To(ContainElement(id), "no member is removed without a snapshot")
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed(), "the Machine is held")

		By("the bucket is back: a snapshot is taken and verified, then the member is removed before its Machine goes")
		s3.SetDown(false)
		e.expectRemoved(ctx, 0, 1)
		got := e.status(ctx)
		Expect(got.Status.Removal).NotTo(BeNil())
		Expect(got.Status.Removal.MachineName).To(Equal(a.Name))
		Expect(got.Status.Removal.Snapshot).NotTo(BeNil(), "status.removal names the snapshot that preceded it")
		rec := got.Status.Removal.Snapshot
		Expect(rec.Size).To(BeNumerically(">", 0))
		Expect(rec.Revision).To(BeNumerically(">", 0))
		Expect(rec.Verified).To(ContainSubstring(snapshotstore.CheckRevision))
		Expect(time.Since(rec.Time.Time)).To(BeNumerically("<", 10*time.Minute))
		store, err := snapshotstore.New(snapshotstore.Config{Endpoint: s3.URL, Bucket: bucket, Prefix: "fleet/", AccessKeyID: s3server.AccessKeyID, SecretAccessKey: s3server.SecretAccessKey})
		Expect(err).NotTo(HaveOccurred())
		keys, err := store.List(ctx, types.NamespacedName{Namespace: e.cpe.Namespace, Name: e.cpe.Spec.ClusterName})
		Expect(err).NotTo(HaveOccurred())
		Expect(keys).To(ContainElement(rec.Key))
		var reasons []string
		for _, ev := range eventsAbout(ctx, a) {
			reasons = append(reasons, ev.Reason)
		}
		Expect(reasons).To(ContainElements(v1alpha1.EventSnapshotTaken, v1alpha1.EventHookReleased))
	}, SpecTimeout(5*time.Minute))
})

var _ = Describe("A K3s snapshot before a member removal (spec.snapshot on K3s)", func() {
	It("holds a K3s Machine's member removal until K3s lists a ready ETCDSnapshotFile stored away from its Node, then removes it", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.33.4+k3s1"})
		c.expectMembers(ctx, 3)
		cpe := c.status(ctx)
		before := cpe.DeepCopy()
		cpe.Spec.Snapshot = &v1alpha1.SnapshotSpec{MaxAge: &metav1.Duration{Duration: 10 * time.Minute}}
		Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(before))).To(Succeed())
		gone := c.machines["cp-2"]

		By("a snapshot stored only on cp-2, the Node being removed, does not count: the removal waits and says why")
		_, err := c.workload.Simulator.SaveSnapshot(ctx, k3ssim.SnapshotSpec{Node: "cp-2"})
		Expect(err).NotTo(HaveOccurred())
		Expect(mgmt.Client.Delete(ctx, gone)).To(Succeed())
		Eventually(func(g Gomega) {
			cond := findCondition(c.status(ctx), v1alpha1.ProgressingCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(v1alpha1.ProgressingWaitingForSnapshotReason), cond.Message)
			g.Expect(cond.Message).To(ContainSubstring("only on Node cp-2"))
		}, deletionTimeout).Should(Succeed())
		Expect(c.status(ctx).Status.Members).To(HaveLen(3), "no member is removed without a snapshot")
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(gone), gone)).To(Succeed(), "the Machine is held")

		By("K3s uploads a snapshot to S3: the removal goes on, preceded by it")
		names, err := c.workload.Simulator.SaveSnapshot(ctx, k3ssim.SnapshotSpec{Node: "cp-2", S3: true})
		Expect(err).NotTo(HaveOccurred())
		c.expectGone(ctx, gone)
		c.expectMembers(ctx, 2)
		rec := c.status(ctx).Status.Removal
		Expect(rec).NotTo(BeNil())
		Expect(rec.Snapshot).NotTo(BeNil())
		Expect(rec.Snapshot.Key).To(And(ContainSubstring("s3://"), ContainSubstring(names[len(names)-1])))
	}, SpecTimeout(5*time.Minute))
})
