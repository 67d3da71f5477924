package manager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// TestWebhookServer_admissionContext serves a webhook with controller-runtime's webhook server as
// the manager builds it, holds a call in flight, and then either stops the server (as the
// manager does last when it stops) or has the caller go away. An admission in flight when the
// server stops must run to its end with a live context, bounded by the call's timeout; one
// whose caller went away ends.
func TestWebhookServer_admissionContext(t *testing.T) {
	for _, tt := range []struct {
		name string
		// end ends the server or the call while the admission is in flight.
		end      func(stopServer, abandonCall context.CancelFunc)
		wantLive bool
	}{
		{name: "the server stops", end: func(stopServer, _ context.CancelFunc) { stopServer() }, wantLive: true},
		{name: "the caller goes away", end: func(_, abandonCall context.CancelFunc) { abandonCall() }, wantLive: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			srv, addr, pool := newTestWebhookServer(t)
			inFlight, release := make(chan struct{}), make(chan struct{})
			seen := make(chan error, 1)
			var deadline time.Time
			srv.Register("/hook", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(inFlight)
				select {
				case <-release:
				case <-r.Context().Done():
				}
				deadline, _ = r.Context().Deadline()
				seen <- r.Context().Err()
				w.WriteHeader(http.StatusOK)
			}))
			serverCtx, stopServer := context.WithCancel(t.Context())
			stopped := make(chan error, 1)
			go func() { stopped <- srv.Start(serverCtx) }()
			t.Cleanup(func() { stopServer(); g.Expect(<-stopped).To(Succeed()) })
			g.Eventually(func() error { return srv.StartedChecker()(nil) }).WithTimeout(time.Minute).Should(Succeed())

			callCtx, abandonCall := context.WithCancel(t.Context())
			defer abandonCall()
			asked := time.Now()
			go func() { _, _ = call(callCtx, addr, pool) }()
			<-inFlight
			tt.end(stopServer, abandonCall)
			if tt.wantLive {
				// Shutdown closes the listener first: the stop has begun.
				g.Eventually(func() bool { return dialable(addr) }).WithTimeout(time.Minute).Should(BeFalse())
				close(release)
				g.Expect(<-seen).To(Succeed(), "the admission in flight keeps a live context through the server's stop")
				g.Expect(deadline).To(BeTemporally("~", asked.Add(10*time.Second), 5*time.Second), "bounded by the call's timeout")
				return
			}
			g.Expect(<-seen).To(MatchError(context.Canceled), "the admission ends with its caller")
		})
	}
}

// newTestWebhookServer returns the manager's webhook server on a free loopback port with a
// self-signed certificate, its address and a pool trusting the certificate.
func newTestWebhookServer(t *testing.T) (*webhookServer, string, *x509.CertPool) {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	crt, key, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600)).To(Succeed())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(crt)).To(BeTrue())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	port := l.Addr().(*net.TCPAddr).Port
	g.Expect(l.Close()).To(Succeed())
	srv := &webhookServer{Server: webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir, TLSOpts: []func(*tls.Config){disableHTTP2}})}
	return srv, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), pool
}

// call posts to /hook as kube-apiserver calls a webhook whose timeoutSeconds is 10.
func call(ctx context.Context, addr string, pool *x509.CertPool) (int, error) {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/hook?timeout=10s", http.NoBody)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// dialable reports whether addr accepts a TCP connection.
func dialable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	return !errors.Is(c.Close(), net.ErrClosed)
}

// TestWebhookServer_drain: once draining, the webhook server answers each call with
// "Connection: close", so a client closes the connection instead of pooling it; before, it keeps
// connections alive.
func TestWebhookServer_drain(t *testing.T) {
	g := NewWithT(t)
	srv, addr, pool := newTestWebhookServer(t)
	srv.Register("/hook", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	ctx, stop := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Start(ctx) }()
	t.Cleanup(func() { stop(); g.Expect(<-stopped).To(Succeed()) })
	g.Eventually(func() error { return srv.StartedChecker()(nil) }).WithTimeout(time.Minute).Should(Succeed())

	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	closes := func() bool {
		resp, err := c.Post("https://"+addr+"/hook?timeout=10s", "application/json", http.NoBody)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		return resp.Close
	}
	g.Expect(closes()).To(BeFalse(), "serving: the connection is kept alive")
	srv.drain()
	g.Expect(closes()).To(BeTrue(), "draining: the response closes the connection")
}
