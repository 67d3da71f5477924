package snapshotstore

import "io"

// teeReader is io.TeeReader that hides the underlying reader's other methods, so that the S3
// client reads it as a stream of unknown length.
type teeReader struct {
	r io.Reader
	w io.Writer
}

func (t teeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		_, _ = t.w.Write(p[:n]) // trailerCheck never fails a write; it records a scratch error
	}
	return n, err
}
