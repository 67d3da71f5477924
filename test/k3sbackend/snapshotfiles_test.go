package k3sbackend_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/test/env/k3ssim"
)

// TestListSnapshotFiles_onTheSimulator: a K3s from the November 2023 patch releases lists its
// snapshots as ETCDSnapshotFile objects (the simulator publishes them as K3s does), and the
// gate counts only a ready one stored away from the Node being removed; an older K3s serves no
// such kind, and the gate says so.
func TestListSnapshotFiles_onTheSimulator(t *testing.T) {
	t.Parallel()
	t.Run("v1.33.4+k3s1 publishes ETCDSnapshotFiles", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := context.Background()
		c := startCluster(t, "v1.33.4+k3s1", 2, clusterOptions{})
		files, err := k3s.ListSnapshotFiles(ctx, c.client)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(files).To(BeEmpty())

		_, err = c.sim.SaveSnapshot(ctx, k3ssim.SnapshotSpec{Node: "cp-0"})
		g.Expect(err).NotTo(HaveOccurred())
		files, err = k3s.ListSnapshotFiles(ctx, c.client)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(files).To(HaveLen(1))
		g.Expect(files[0].ReadyToUse).To(BeTrue())
		g.Expect(files[0].NodeName).To(Equal("cp-0"))
		g.Expect(files[0].Size).To(Equal(int64(4 << 20)))
		now := time.Now()
		f, why := k3s.ChooseSnapshot(files, "cp-0", now, 10*time.Minute)
		g.Expect(f).To(BeNil(), "a copy only on the Node being removed goes with it")
		g.Expect(why).To(ContainSubstring("only on Node cp-0"))
		f, _ = k3s.ChooseSnapshot(files, "cp-1", now, 10*time.Minute)
		g.Expect(f).NotTo(BeNil(), "a copy on another Node counts")

		_, err = c.sim.SaveSnapshot(ctx, k3ssim.SnapshotSpec{Node: "cp-0", S3: true})
		g.Expect(err).NotTo(HaveOccurred())
		files, err = k3s.ListSnapshotFiles(ctx, c.client)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(files).To(HaveLen(3))
		f, _ = k3s.ChooseSnapshot(files, "cp-0", time.Now(), 10*time.Minute)
		g.Expect(f).NotTo(BeNil())
		g.Expect(f.InS3()).To(BeTrue(), "the S3 copy of a snapshot cp-0 took counts for cp-0's removal")

		_, err = c.sim.SaveSnapshot(ctx, k3ssim.SnapshotSpec{Node: "cp-1", Failed: true})
		g.Expect(err).NotTo(HaveOccurred())
		files, err = k3s.ListSnapshotFiles(ctx, c.client)
		g.Expect(err).NotTo(HaveOccurred())
		f, _ = k3s.ChooseSnapshot(files, "cp-0", time.Now(), 10*time.Minute)
		g.Expect(f.InS3()).To(BeTrue(), "a failed snapshot (readyToUse false) never counts")
	})
	t.Run("v1.28.3+k3s1 serves no ETCDSnapshotFile", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := context.Background()
		c := startCluster(t, "v1.28.3+k3s1", 1, clusterOptions{})
		_, err := c.sim.SaveSnapshot(ctx, k3ssim.SnapshotSpec{Node: "cp-0"})
		g.Expect(err).To(MatchError(k3ssim.ErrNoSnapshotFiles))
		_, err = k3s.ListSnapshotFiles(ctx, c.client)
		g.Expect(err).To(MatchError(k3s.ErrNoSnapshotFiles))
	})
}

func TestChooseSnapshot(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	file := func(name, node, loc string, ready bool, ago time.Duration) k3s.SnapshotFile {
		return k3s.SnapshotFile{Name: name, NodeName: node, Location: loc, ReadyToUse: ready, CreationTime: now.Add(-ago)}
	}
	tests := []struct {
		name  string
		files []k3s.SnapshotFile
		want  string
	}{
		{name: "No file: none", want: ""},
		{name: "A ready local file on another Node counts", files: []k3s.SnapshotFile{file("a", "cp-1", "file:///s/a", true, time.Minute)}, want: "a"},
		{name: "A local file only on the Node being removed does not count", files: []k3s.SnapshotFile{file("a", "cp-0", "file:///s/a", true, time.Minute)}, want: ""},
		{name: "An S3 copy taken by the Node being removed counts", files: []k3s.SnapshotFile{file("a", "cp-0", "s3://b/a", true, time.Minute)}, want: "a"},
		{name: "A file not readyToUse does not count", files: []k3s.SnapshotFile{file("a", "cp-1", "s3://b/a", false, time.Minute)}, want: ""},
		{name: "A file older than maxAge does not count", files: []k3s.SnapshotFile{file("a", "cp-1", "s3://b/a", true, 11*time.Minute)}, want: ""},
		{name: "A file from the future does not count", files: []k3s.SnapshotFile{file("a", "cp-1", "s3://b/a", true, -time.Minute)}, want: ""},
		{name: "The newest counting file wins", files: []k3s.SnapshotFile{file("old", "cp-1", "s3://b/o", true, 5*time.Minute), file("new", "cp-2", "file:///s/n", true, time.Minute), file("newest-on-removed", "cp-0", "file:///s/x", true, 0)}, want: "new"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			f, why := k3s.ChooseSnapshot(tt.files, "cp-0", now, 10*time.Minute)
			if tt.want == "" {
				g.Expect(f).To(BeNil())
				g.Expect(why).NotTo(BeEmpty())
				return
			}
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Name).To(Equal(tt.want))
			g.Expect(why).To(BeEmpty())
		})
	}
}
