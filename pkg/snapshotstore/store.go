package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// partSize is the size of one part of a multipart upload: minio-go buffers one part at a time
// for a stream of unknown length, so it is the memory one snapshot in flight costs.
const partSize = 16 << 20

// Config is where snapshots go.
type Config struct {
	// Endpoint is the S3 endpoint URL, https://host[:port] or http://host[:port].
	Endpoint string
	// Region is the bucket's region; empty lets the client find it.
	Region string
	// Bucket is the bucket.
	Bucket string
	// Prefix is prepended to every key.
	Prefix string
	// AccessKeyID, SecretAccessKey and SessionToken are the S3 credentials.
	AccessKeyID, SecretAccessKey, SessionToken string
	// ScratchDir, when set, is where the database is written during the upload for the
	// consistency and revision check; it needs room for the largest database. Without it only
	// the sha256 trailer and the stored size are checked.
	ScratchDir string
}

// Store uploads verified snapshots to one bucket.
type Store struct {
	cfg Config
	cli *minio.Client
}

// New returns the Store of cfg. It does not connect.
func New(cfg Config) (*Store, error) {
	u, err := url.Parse(cfg.Endpoint)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: snapshot endpoint %q is not a URL: %w", etcd.ErrInvalidInput, cfg.Endpoint, err)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "", u.Path != "" && u.Path != "/":
		return nil, fmt.Errorf("%w: snapshot endpoint %q must be https://host[:port] or http://host[:port]", etcd.ErrInvalidInput, cfg.Endpoint)
	case cfg.Bucket == "":
		return nil, fmt.Errorf("%w: no snapshot bucket given", etcd.ErrInvalidInput)
	case cfg.AccessKeyID == "" || cfg.SecretAccessKey == "":
		return nil, fmt.Errorf("%w: the snapshot credentials have no access key ID or secret access key", etcd.ErrInvalidInput)
	}
	cli, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken),
		Secure: u.Scheme == "https",
		Region: cfg.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: failed to make an S3 client for %s: %w", etcd.ErrInvalidInput, cfg.Endpoint, err)
	}
	return &Store{cfg: cfg, cli: cli}, nil
}

// Saved is a snapshot that was uploaded and verified.
type Saved struct {
	// Key is the object key.
	Key string
	// Revision is the revision the database holds (its newest key revision); 0 when not
	// checked (no scratch space).
	Revision int64
	// Size is the object's size in bytes (database and trailer).
	Size int64
	// Time is when the stream was opened.
	Time time.Time
	// Verified names the checks made.
	Verified []string
}

// Check names, for Saved.Verified.
const (
	CheckSHA256      = "sha256"
	CheckStoredSize  = "stored-size"
	CheckConsistency = "bbolt-consistency"
	CheckRevision    = "revision"
)

// Save streams s to the bucket under the Cluster's prefix and verifies it; it closes s.Body. A
// snapshot that fails a check is removed from the bucket again, and Save fails.
func (st *Store) Save(ctx context.Context, cluster types.NamespacedName, s *etcd.DatabaseSnapshot, at time.Time) (Saved, error) {
	// The snapshot stream is read to its end or abandoned; an error closing it changes nothing
	// in what was stored or verified.
	defer func() { _ = s.Body.Close() }()
	key := st.clusterPrefix(cluster) + at.UTC().Format("20060102T150405.000Z") + ".db"
	var scratch *os.File
	if st.cfg.ScratchDir != "" {
		f, err := os.CreateTemp(st.cfg.ScratchDir, "snapshot-*.db")
		if err != nil {
			return Saved{}, fmt.Errorf("failed to create a scratch file for the snapshot: %w", err)
		}
		// verify syncs the scratch file before it reads it back, so closing it loses nothing; a
		// scratch file left behind is only space in ScratchDir, not a reason to fail a snapshot
		// that was stored and verified.
		defer func() { _ = os.Remove(f.Name()) }()
		defer func() { _ = f.Close() }()
		scratch = f
	}
	check := newTrailerCheck(nil)
	if scratch != nil {
		check = newTrailerCheck(scratch)
	}
	info, err := st.cli.PutObject(ctx, st.cfg.Bucket, key, teeReader{r: s.Body, w: check}, -1, minio.PutObjectOptions{
		ContentType: "application/octet-stream",
		PartSize:    partSize,
		// The bucket checks every part against its MD5. The payload is not signed (as minio-go
		// does over https anyway), so plain-http buckets take the same request as TLS ones
		// instead of aws-chunked streaming signatures, which not every S3-compatible server
		// stores correctly.
		SendContentMd5:       true,
		DisableContentSha256: true,
		UserMetadata: map[string]string{
			"etcd-member":          s.Member.String(),
			"etcd-revision-before": strconv.FormatInt(s.RevisionBefore, 10),
			"etcd-storage-version": s.Version,
		},
	})
	if err != nil {
		return Saved{}, fmt.Errorf("failed to upload the etcd snapshot of member %s to %s/%s: %w", s.Member, st.cfg.Bucket, key, err)
	}
	saved := Saved{Key: key, Size: info.Size, Time: at}
	if err := st.verify(ctx, check, scratch, s, &saved); err != nil {
		if rmErr := st.cli.RemoveObject(context.WithoutCancel(ctx), st.cfg.Bucket, key, minio.RemoveObjectOptions{}); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("failed to remove the unverified snapshot %s: %w", key, rmErr))
		}
		return Saved{}, fmt.Errorf("etcd snapshot %s of member %s failed verification: %w", key, s.Member, err)
	}
	return saved, nil
}

// verify runs the checks on an uploaded snapshot and records them in saved.
func (st *Store) verify(ctx context.Context, check *trailerCheck, scratch *os.File, s *etcd.DatabaseSnapshot, saved *Saved) error {
	if err := check.verify(); err != nil {
		return err
	}
	saved.Verified = append(saved.Verified, CheckSHA256)
	obj, err := st.cli.StatObject(ctx, st.cfg.Bucket, saved.Key, minio.StatObjectOptions{})
	switch {
	case err != nil:
		return fmt.Errorf("failed to read back the stored snapshot's size: %w", err)
	case obj.Size != check.n || saved.Size != check.n:
		return fmt.Errorf("the bucket stores %d bytes of a %d-byte snapshot", obj.Size, check.n)
	}
	saved.Verified = append(saved.Verified, CheckStoredSize)
	if scratch == nil {
		return nil
	}
	if err := scratch.Sync(); err != nil {
		return fmt.Errorf("failed to write the database to scratch space: %w", err)
	}
	// Important! etcdutl's Status runs bbolt's tx.Check over every page and reads the newest
	// revision of the key bucket (etcdutl/snapshot/v3_snapshot.go Status).
	status, err := snapshot.NewV3(zap.NewNop()).Status(scratch.Name())
	if err != nil {
		return fmt.Errorf("the database is not consistent: %w", err)
	}
	saved.Verified = append(saved.Verified, CheckConsistency)
	rev, err := dbRevision(scratch.Name(), status.Revision)
	if err != nil {
		return err
	}
	if rev < s.RevisionBefore {
		return fmt.Errorf("the database holds revision %d, older than revision %d the member reported right before", rev, s.RevisionBefore)
	}
	saved.Revision = rev
	saved.Verified = append(saved.Verified, CheckRevision)
	return nil
}

// Prune removes the Cluster's snapshots but the newest keep; it touches only keys Save made.
func (st *Store) Prune(ctx context.Context, cluster types.NamespacedName, keep int) (int, error) {
	keys, err := st.List(ctx, cluster)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, k := range keys[:max(len(keys)-keep, 0)] {
		if err := st.cli.RemoveObject(ctx, st.cfg.Bucket, k, minio.RemoveObjectOptions{}); err != nil {
			return removed, fmt.Errorf("failed to remove old etcd snapshot %s: %w", k, err)
		}
		removed++
	}
	return removed, nil
}

// List returns the keys of the Cluster's snapshots, oldest first.
func (st *Store) List(ctx context.Context, cluster types.NamespacedName) ([]string, error) {
	prefix := st.clusterPrefix(cluster)
	var keys []string
	for o := range st.cli.ListObjects(ctx, st.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("failed to list etcd snapshots under %s: %w", prefix, o.Err)
		}
		if rest := strings.TrimPrefix(o.Key, prefix); !strings.Contains(rest, "/") && path.Ext(rest) == ".db" {
			keys = append(keys, o.Key)
		}
	}
	slices.Sort(keys) // the keys are UTC times in a sortable layout
	return keys, nil
}

// Open returns the object at key, for a restore.
func (st *Store) Open(ctx context.Context, key string) (*minio.Object, error) {
	return st.cli.GetObject(ctx, st.cfg.Bucket, key, minio.GetObjectOptions{})
}

func (st *Store) clusterPrefix(cluster types.NamespacedName) string {
	return st.cfg.Prefix + cluster.Namespace + "/" + cluster.Name + "/"
}
