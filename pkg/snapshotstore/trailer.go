package snapshotstore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
)

// trailerCheck is the writer a snapshot stream is teed into: it hashes everything but the last
// sha256.Size bytes, which it holds back as the trailer etcd appends (etcd
// server/etcdserver/api/v3rpc/maintenance.go Snapshot), and copies the database (without the
// trailer) to db when set, for the consistency check.
type trailerCheck struct {
	h    hash.Hash
	db   io.Writer
	tail []byte
	n    int64
	err  error
}

func newTrailerCheck(db io.Writer) *trailerCheck {
	return &trailerCheck{h: sha256.New(), db: db}
}

// Write keeps the last sha256.Size bytes seen and passes the rest on.
func (t *trailerCheck) Write(p []byte) (int, error) {
	t.n += int64(len(p))
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - sha256.Size; over > 0 {
		t.pass(t.tail[:over])
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	return len(p), nil
}

func (t *trailerCheck) pass(b []byte) {
	t.h.Write(b)
	if t.db != nil && t.err == nil {
		if _, err := t.db.Write(b); err != nil {
			t.err = fmt.Errorf("failed to write the database to scratch space: %w", err)
		}
	}
}

// errNoTrailer is returned for a stream whose length does not end in a sha256 trailer (etcd
// issue 18340 reports snapshots missing it).
var errNoTrailer = errors.New("the snapshot stream does not end in etcd's sha256 trailer")

// verify checks that the stream seen was a database of whole bbolt pages followed by its
// sha256, as etcdutl's restore expects (etcdutl/snapshot/v3_snapshot.go hasChecksum).
func (t *trailerCheck) verify() error {
	switch {
	case t.err != nil:
		return t.err
	case t.n < sha256.Size || (t.n-sha256.Size)%512 != 0:
		return fmt.Errorf("%w (%d bytes)", errNoTrailer, t.n)
	case !bytes.Equal(t.h.Sum(nil), t.tail):
		return fmt.Errorf("the snapshot's sha256 trailer does not match its %d-byte database: the stream was corrupted", t.n-sha256.Size)
	}
	return nil
}
