package manager

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// maxWebhookTimeout is the longest a webhook call may take: the largest timeoutSeconds of a
// webhook configuration (admissionregistration.k8s.io/v1), used when a call names none.
const maxWebhookTimeout = 30 * time.Second

// webhookServer is controller-runtime's webhook server with two changes for a replica's end.
//
// While draining (Run's shutdown delay) every response carries "Connection: close", so the
// server closes each of kube-apiserver's pooled HTTP/1.1 connections right after answering on
// it, and kube-apiserver dials anew, through the Service, to a replica that is not ending. A
// keep-alive connection closed by the server while idle instead (http.Server.Shutdown) races a
// request kube-apiserver is writing on it, which then fails with EOF: Go's client replays only
// requests it had not written, and kube-apiserver does not retry a webhook call.
//
// Its admissions are not cancelled by its own shutdown. controller-runtime serves each request
// with a context derived from the server's (http.Server.BaseContext, pkg/internal/httpserver)
// and cancels that when it stops the server, which it does after the controllers and caches,
// while http.Server.Shutdown waits for the requests in flight. A request kube-apiserver sent on
// one of its pooled connections just before the stop would be answered with its reads failing
// ("context canceled"): the hook webhook would deny a Machine's creation, and kube-apiserver
// does not retry a webhook call. Each admission keeps the deadline kube-apiserver put on the
// call instead, and still ends when kube-apiserver goes away.
type webhookServer struct {
	webhook.Server
	// stopping is the context the server was started with, once started.
	stopping atomic.Pointer[context.Context]
	draining atomic.Bool
}

// drain makes every response from now on close its connection.
func (s *webhookServer) drain() { s.draining.Store(true) }

// Register registers hook under path, served with the call's own deadline.
func (s *webhookServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		ctx, cancel := s.admissionContext(r)
		defer cancel()
		hook.ServeHTTP(w, r.WithContext(ctx))
	}))
}

// Start serves until ctx ends, then shuts down as controller-runtime does.
func (s *webhookServer) Start(ctx context.Context) error {
	s.stopping.Store(&ctx)
	return s.Server.Start(ctx)
}

// admissionContext is r's context without the server's cancellation: it ends at the call's
// timeout (kube-apiserver sends it as the "timeout" query parameter, client-go's
// rest.Request.Timeout) or when the request's own context ends for another reason than the
// server stopping (kube-apiserver closed the connection).
func (s *webhookServer) admissionContext(r *http.Request) (context.Context, context.CancelFunc) {
	timeout, err := time.ParseDuration(r.URL.Query().Get("timeout"))
	if err != nil || timeout <= 0 || timeout > maxWebhookTimeout {
		timeout = maxWebhookTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), timeout)
	// A context's error is set before its children are cancelled, so when r's context ends
	// because the server's did, the server's error is visible here.
	stop := context.AfterFunc(r.Context(), func() {
		if server := s.stopping.Load(); server == nil || (*server).Err() == nil {
			cancel()
		}
	})
	return ctx, func() { stop(); cancel() }
}
