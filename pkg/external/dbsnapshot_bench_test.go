package external

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-adapter/etcd-adapter/pkg/snapshotstore"
)

// BenchmarkSnapshot compares, on one real etcd database of ETCD_ADAPTER_BENCH_SNAPSHOT_MIB MiB
// of values (default 100), a plain clientv3 Snapshot read to the end with the product path a
// removal waits for: SnapshotDatabase through the external backend, then Save (upload to an
// in-process S3 server, sha256 trailer, stored size, bbolt consistency and revision on scratch
// space). It reports MiB/s of each and the seconds a removal waits for its snapshot. Not part
// of make test; run it alone:
//
//	go test ./pkg/external -run '^$' -bench BenchmarkSnapshot -benchtime 3x
func BenchmarkSnapshot(b *testing.B) {
	mib := 100
	if v := os.Getenv("ETCD_ADAPTER_BENCH_SNAPSHOT_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("ETCD_ADAPTER_BENCH_SNAPSHOT_MIB: %v", err)
		}
		mib = n
	}
	ctx := context.Background()
	e := startExternal(b, mgmt, 1)
	cli, err := e.etcd.NewClient(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	value := string(bytes.Repeat([]byte("x"), 1<<20))
	for i := range mib {
		if _, err := cli.Put(ctx, fmt.Sprintf("/bench/%06d", i), value); err != nil {
			b.Fatalf("failed to fill etcd: %v", err)
		}
	}
	backend := e.backend(b)
	s3 := startS3(b)
	store, err := snapshotstore.New(snapshotstore.Config{Endpoint: s3.URL, Bucket: snapshotBucket,
		AccessKeyID: "bench", SecretAccessKey: "bench", ScratchDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	cluster := types.NamespacedName{Namespace: e.key.Namespace, Name: e.key.Name}

	b.Run("plain-clientv3-Snapshot", func(b *testing.B) {
		var size int64
		start := time.Now()
		for b.Loop() {
			rc, err := cli.Snapshot(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if size, err = io.Copy(io.Discard, rc); err != nil {
				b.Fatal(err)
			}
			_ = rc.Close()
		}
		report(b, size, time.Since(start))
	})
	noScratch, err := snapshotstore.New(snapshotstore.Config{Endpoint: s3.URL, Bucket: snapshotBucket, AccessKeyID: "bench", SecretAccessKey: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("product-without-scratch", func(b *testing.B) { benchProduct(ctx, b, backend, noScratch, cluster) })
	b.Run("product-stream-verify-upload", func(b *testing.B) { benchProduct(ctx, b, backend, store, cluster) })
}

// benchProduct is the product path a removal waits for: stream, upload, verify, prune.
func benchProduct(ctx context.Context, b *testing.B, backend *Backend, store *snapshotstore.Store, cluster types.NamespacedName) {
	{
		var size int64
		start := time.Now()
		for b.Loop() {
			db, err := backend.SnapshotDatabase(ctx)
			if err != nil {
				b.Fatal(err)
			}
			saved, err := store.Save(ctx, cluster, db, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			size = saved.Size
			if _, err := store.Prune(ctx, cluster, 1); err != nil {
				b.Fatal(err)
			}
		}
		report(b, size, time.Since(start))
	}
}

func report(b *testing.B, size int64, took time.Duration) {
	per := took / time.Duration(b.N)
	b.ReportMetric(float64(size)/(1<<20), "MiB")
	b.ReportMetric(float64(size)/(1<<20)/per.Seconds(), "MiB/s")
	b.ReportMetric(per.Seconds(), "s/snapshot")
}
