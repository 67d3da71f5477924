package external

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	etcdutl "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/snapshotstore"
	"github.com/etcd-adapter/etcd-adapter/test/env/s3server"
)

const snapshotBucket = "etcd-snapshots"

func startS3(t testing.TB) *s3server.Server {
	t.Helper()
	s, err := s3server.Start(snapshotBucket)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(s.Close)
	return s
}

func newStore(t *testing.T, s *s3server.Server, scratch string) *snapshotstore.Store {
	t.Helper()
	st, err := snapshotstore.New(snapshotstore.Config{Endpoint: s.URL, Bucket: snapshotBucket, Prefix: "fleet/",
		AccessKeyID: s3server.AccessKeyID, SecretAccessKey: s3server.SecretAccessKey, ScratchDir: scratch})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return st
}

// TestSnapshotDatabase_restore takes a snapshot of a real 3-member TLS etcd through the external
// backend (from a follower), uploads and verifies it into a real S3 server, then restores the
// object it uploaded with etcd's own etcdutl restore into a new data dir, starts etcd on it and
// reads a key written before the snapshot.
func TestSnapshotDatabase_restore(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startExternal(t, mgmt, 3)
	cli, err := e.etcd.NewClient(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cli.Close() }()
	put, err := cli.Put(ctx, "/registry/before", "written-before-the-snapshot")
	g.Expect(err).NotTo(HaveOccurred())
	b := e.backend(t)
	s3 := startS3(t)
	store := newStore(t, s3, t.TempDir())

	db, err := b.SnapshotDatabase(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	obs, err := b.Observe(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(db.Member.ID).NotTo(Equal(obs.LeaderID), "a healthy follower is snapshotted, to spare the leader")
	g.Expect(db.RevisionBefore).To(BeNumerically(">=", put.Header.Revision))
	cluster := types.NamespacedName{Namespace: e.key.Namespace, Name: e.key.Name}
	saved, err := store.Save(ctx, cluster, db, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(saved.Verified).To(Equal([]string{snapshotstore.CheckSHA256, snapshotstore.CheckStoredSize, snapshotstore.CheckConsistency, snapshotstore.CheckRevision}))
	g.Expect(saved.Revision).To(BeNumerically(">=", put.Header.Revision))
	g.Expect(saved.Key).To(HavePrefix(fmt.Sprintf("fleet/%s/%s/", cluster.Namespace, cluster.Name)))

	// Restore what is in the bucket, not what was streamed.
	obj, err := store.Open(ctx, saved.Key)
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "restore.db")
	f, err := os.Create(path)
	g.Expect(err).NotTo(HaveOccurred())
	n, err := io.Copy(f, obj)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Close()).To(Succeed())
	g.Expect(n).To(Equal(saved.Size))
	value := restoreAndGet(t, path, "/registry/before")
	g.Expect(value).To(Equal("written-before-the-snapshot"))
}

// restoreAndGet restores the snapshot at path with etcdutl (hash checked) into a new data dir,
// starts a one-member etcd on it and reads key.
func restoreAndGet(t *testing.T, path, key string) string {
	t.Helper()
	g := NewWithT(t)
	peer, clientURL := freeURL(t), freeURL(t)
	dir := filepath.Join(t.TempDir(), "restored")
	g.Expect(etcdutl.NewV3(zap.NewNop()).Restore(etcdutl.RestoreConfig{
		SnapshotPath: path, Name: "restored", OutputDataDir: dir, PeerURLs: []string{peer.String()},
		InitialCluster: "restored=" + peer.String(), InitialClusterToken: "restored",
	})).To(Succeed())
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.LogLevel = "restored", dir, "error"
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*clientURL}, []url.URL{*clientURL}
	cfg.InitialCluster, cfg.InitialClusterToken = "restored="+peer.String(), "restored"
	srv, err := embed.StartEtcd(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	defer srv.Close()
	select {
	case <-srv.Server.ReadyNotify():
	case <-time.After(time.Minute):
		t.Fatal("the restored etcd did not become ready")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL.String()}, DialTimeout: 10 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Kvs).To(HaveLen(1))
	return string(r.Kvs[0].Value)
}

func freeURL(t *testing.T) *url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return &url.URL{Scheme: "http", Host: l.Addr().String()}
}

// TestSnapshotStore_rejectsBadTrailer: a stream whose sha256 trailer does not match its
// database, or that has none, fails verification and leaves nothing in the bucket.
func TestSnapshotStore_rejectsBadTrailer(t *testing.T) {
	db := bytes.Repeat([]byte{7}, 4096)
	sum := sha256.Sum256(db)
	bad := append(bytes.Clone(db), sum[:]...)
	bad[10] ^= 0xff
	tests := []struct {
		name    string
		stream  []byte
		wantErr string
	}{
		{name: "A corrupted database does not match its trailer", stream: bad, wantErr: "does not match"},
		{name: "A stream without a trailer is refused", stream: db, wantErr: "does not end in etcd's sha256 trailer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			s3 := startS3(t)
			store := newStore(t, s3, "")
			cluster := types.NamespacedName{Namespace: "ns", Name: "c"}
			_, err := store.Save(ctx, cluster, &etcd.DatabaseSnapshot{Body: io.NopCloser(bytes.NewReader(tt.stream))}, time.Now())
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			keys, err := store.List(ctx, cluster)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(keys).To(BeEmpty())
		})
	}
}

// TestSnapshotStore_bucketDownThenUp: while the bucket is down Save fails (bounded by its
// context); once it is back Save succeeds, and Prune keeps the newest N.
func TestSnapshotStore_bucketDownThenUp(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := startExternal(t, mgmt, 1)
	b := e.backend(t)
	s3 := startS3(t)
	store := newStore(t, s3, "")
	cluster := types.NamespacedName{Namespace: e.key.Namespace, Name: e.key.Name}

	s3.SetDown(true)
	db, err := b.SnapshotDatabase(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	down, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = store.Save(down, cluster, db, time.Now())
	cancel()
	g.Expect(err).To(HaveOccurred())

	s3.SetDown(false)
	at := time.Now()
	for i := range 3 {
		db, err := b.SnapshotDatabase(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		saved, err := store.Save(ctx, cluster, db, at.Add(time.Duration(i)*time.Second))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(saved.Verified).To(Equal([]string{snapshotstore.CheckSHA256, snapshotstore.CheckStoredSize}), "without scratch space only the trailer and the stored size are checked")
	}
	removed, err := store.Prune(ctx, cluster, 2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(Equal(1))
	keys, err := store.List(ctx, cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys).To(HaveLen(2))
	g.Expect(keys[1]).To(ContainSubstring(at.Add(2 * time.Second).UTC().Format("20060102T150405")))
}
