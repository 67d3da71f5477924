// Package snapshotstore takes a verified etcd snapshot into an S3-compatible bucket: it streams
// a member's snapshot (etcd.DatabaseSnapshotter) to the bucket with minio-go while it checks the
// sha256 trailer etcd appends, and, with scratch space, the database's bbolt consistency and its
// revision against the one read right before (etcd's own etcdutl snapshot Status); it keeps the
// newest N snapshots of a Cluster.
package snapshotstore
