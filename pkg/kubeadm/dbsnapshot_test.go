package kubeadm

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-adapter/etcd-adapter/pkg/snapshotstore"
	"github.com/etcd-adapter/etcd-adapter/test/env/s3server"
)

// TestBackend_SnapshotDatabase streams a real 3-member etcd's database through the member's
// port-forward (the kubelet stand-in), from a follower, into a real S3 server, with every check
// (sha256 trailer, stored size, bbolt consistency, revision against the one read right before).
func TestBackend_SnapshotDatabase(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w := startWorkloadCluster(t, workload, 3)
	b := w.backend(t)
	s := observeHealthy(ctx, g, b, 3)
	s3, err := s3server.Start("snapshots")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(s3.Close)
	store, err := snapshotstore.New(snapshotstore.Config{Endpoint: s3.URL, Bucket: "snapshots",
		AccessKeyID: s3server.AccessKeyID, SecretAccessKey: s3server.SecretAccessKey, ScratchDir: t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())

	db, err := b.SnapshotDatabase(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(db.Member.ID).NotTo(Equal(s.LeaderID), "a healthy follower is snapshotted, to spare the leader")
	g.Expect(db.Member.NodeName).NotTo(BeEmpty())
	saved, err := store.Save(ctx, types.NamespacedName{Namespace: w.key.Namespace, Name: w.key.Name}, db, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(saved.Verified).To(Equal([]string{snapshotstore.CheckSHA256, snapshotstore.CheckStoredSize, snapshotstore.CheckConsistency, snapshotstore.CheckRevision}))
	g.Expect(saved.Revision).To(BeNumerically(">=", db.RevisionBefore))
}
