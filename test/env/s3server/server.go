// Package s3server runs an S3-compatible server in-process for tests (gofakes3 with its
// in-memory backend), which a test can take down and bring back with its objects kept.
package s3server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Credentials gofakes3 accepts (it does not check signatures).
const (
	AccessKeyID     = "test-access-key"
	SecretAccessKey = "test-secret-key"
)

// Server is one S3 server on loopback.
type Server struct {
	// URL is the endpoint, http://127.0.0.1:port.
	URL     string
	backend *s3mem.Backend
	http    *httptest.Server
	down    atomic.Bool
}

// Start starts a server with the buckets given.
func Start(buckets ...string) (*Server, error) {
	s := &Server{backend: s3mem.New()}
	for _, b := range buckets {
		if err := s.backend.CreateBucket(b); err != nil {
			return nil, fmt.Errorf("failed to create bucket %s: %w", b, err)
		}
	}
	faker := gofakes3.New(s.backend)
	h := faker.Server()
	s.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.down.Load() {
			// A bucket that is down: the connection is dropped without an answer, as when its
			// host is unreachable.
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					_ = c.Close()
					return
				}
			}
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	s.URL = s.http.URL
	return s, nil
}

// SetDown takes the server down (true) or brings it back (false); objects are kept.
func (s *Server) SetDown(down bool) { s.down.Store(down) }

// Close stops the server.
func (s *Server) Close() { s.http.Close() }
