package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-adapter/etcd-adapter/controlplane/webhooks/quorumguard"
)

// spreadProxy listens where the management apiserver calls the webhooks and hands each request
// to the next of several webhook servers in turn, as a Service in front of the etcd-adapter
// replicas does for requests from several apiservers or over HTTP/1.1 connections.
//
// While a round is armed it also plays the schedule that races the quorum guard hardest: the
// round's DELETE reviews are passed on together once all have arrived (kubectl sends them at
// once), and their answers are returned together once all were answered (the apiserver writes
// a deletion only after every validating webhook answered, so none of the round's deletions is
// written while the others are decided). Answers are held at most roundHold, well inside the
// webhooks' 10 s timeout.
type spreadProxy struct {
	srv       *http.Server
	backends  []*url.URL
	transport *http.Transport
	next      atomic.Uint64

	mu    sync.Mutex
	round *heldRound
	// sentTo counts the reviews of the rounds each backend answered, by backend index.
	sentTo []int
}

// roundHold bounds how long the proxy waits for the rest of a round.
const roundHold = 3 * time.Second

type heldRound struct {
	want               int
	arrived, answered  int
	allIn, allAnswered chan struct{}
}

// startSpreadProxy serves on the webhook address of wio, in front of webhook servers on ports.
func startSpreadProxy(wio *envtest.WebhookInstallOptions, ports ...int) (*spreadProxy, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(wio.LocalServingCertDir, "tls.crt"), filepath.Join(wio.LocalServingCertDir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("failed to load the webhook serving certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(wio.LocalServingCAData) {
		return nil, errors.New("failed to read the webhook CA")
	}
	p := &spreadProxy{transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, sentTo: make([]int, len(ports))}
	for _, port := range ports {
		p.backends = append(p.backends, &url.URL{Scheme: "https", Host: net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(port))})
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort)),
		&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		return nil, fmt.Errorf("failed to listen on the webhook address: %w", err)
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// arm makes the next n quorum guard reviews one round.
func (p *spreadProxy) arm(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.round = &heldRound{want: n, allIn: make(chan struct{}), allAnswered: make(chan struct{})}
}

// join counts r into the armed round, if it is one of its reviews.
func (p *spreadProxy) join(r *http.Request) *heldRound {
	if r.URL.Path != quorumguard.Path {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	round := p.round
	if round == nil || round.arrived == round.want {
		return nil
	}
	round.arrived++
	if round.arrived == round.want {
		close(round.allIn)
	}
	return round
}

func (p *spreadProxy) answered(round *heldRound, backend int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sentTo[backend]++
	round.answered++
	if round.answered == round.want {
		close(round.allAnswered)
	}
}

// spread returns how many reviews of the rounds each backend answered.
func (p *spreadProxy) spread() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.sentTo...)
}

func (p *spreadProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	round := p.join(r)
	if round != nil {
		waitHeld(round.allIn)
	}
	i := int(p.next.Add(1) % uint64(len(p.backends)))
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(p.backends[i]) }, Transport: p.transport}
	if round == nil {
		rp.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	rp.ServeHTTP(rec, r)
	p.answered(round, i)
	waitHeld(round.allAnswered)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func waitHeld(ch <-chan struct{}) {
	select {
	case <-ch:
	case <-time.After(roundHold):
	}
}

// Close stops the proxy.
func (p *spreadProxy) Close() error {
	p.transport.CloseIdleConnections()
	return p.srv.Close()
}

// freePort returns a loopback port nothing listens on.
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
