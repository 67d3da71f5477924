package snapshotstore

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
)

// dbRevision is the revision a database holds, as etcd's mvcc store restores it: the newest
// of the revision of its newest key (keysRevision, from etcdutl's Status), its finished
// compaction (a compaction may have removed the newest key's tombstone) and 1, the revision of
// a store nothing was written to (etcd server/storage/mvcc kvstore.go restore).
func dbRevision(path string, keysRevision int64) (int64, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		return 0, fmt.Errorf("failed to open the database: %w", err)
	}
	// A read-only database: closing it has nothing left to lose.
	defer func() { _ = db.Close() }()
	rev := max(keysRevision, 1)
	err = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(schema.Meta.Name()); b != nil {
			if v := b.Get(schema.FinishedCompactKeyName); len(v) > 0 {
				rev = max(rev, mvcc.BytesToRev(v).Main)
			}
		}
		return nil
	})
	return rev, err
}
