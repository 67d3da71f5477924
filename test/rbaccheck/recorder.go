package rbaccheck

import (
	"net/http"
	"slices"
	"sync"

	"k8s.io/client-go/rest"
)

// Recorded is one request as a client sent it, with the status code the apiserver answered.
type Recorded struct {
	Request
	// Code is the HTTP status code; 0 when the request failed without an answer.
	Code int
}

// Recorder records every request sent through the rest.Configs it wraps.
type Recorder struct {
	mu       sync.Mutex
	seen     map[Recorded]bool
	recorded []Recorded
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{seen: map[Recorded]bool{}} }

// Wrap makes cfg record every request its clients send (cfg.Wrap, so it applies to every
// client built from cfg or a copy of it, informers and event recorders included).
func (r *Recorder) Wrap(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &recordingTransport{next: rt, rec: r} })
}

// Requests returns the distinct requests recorded so far, in the order first seen.
func (r *Recorder) Requests() []Recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recorded)
}

// ResourceRequests returns the distinct requests as RBAC sees them (no status codes).
func (r *Recorder) ResourceRequests() []Request {
	var out []Request
	for _, rec := range r.Requests() {
		if !slices.Contains(out, rec.Request) {
			out = append(out, rec.Request)
		}
	}
	return out
}

func (r *Recorder) add(rec Recorded) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[rec] {
		return
	}
	r.seen[rec] = true
	r.recorded = append(r.recorded, rec)
}

type recordingTransport struct {
	next http.RoundTripper
	rec  *Recorder
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	rec := Recorded{Request: ParseRequest(req.Method, req.URL)}
	if resp != nil {
		rec.Code = resp.StatusCode
	}
	t.rec.add(rec)
	return resp, err
}
