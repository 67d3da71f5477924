package clusterctl

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// releaseHosts stands in for the two hosts the clusterctl binary reads Cluster API's own release
// from when a command touches the core provider, whose repository is by default
// https://github.com/kubernetes-sigs/cluster-api/releases/latest/core-components.yaml: it lists
// the repository's versions on the Go proxy (proxy.golang.org, path
// github.com/kubernetes-sigs/cluster-api/@v/list) and reads the release's metadata.yaml from
// github.com/kubernetes-sigs/cluster-api/releases/download/<version>/metadata.yaml
// (cmd/clusterctl/client/repository/repository_github.go, GetVersions and GetFile). This machine
// reaches neither; a user's clusterctl does. It is an HTTPS proxy (HTTPS_PROXY) that answers
// CONNECT to those hosts itself, with a certificate of a CA of its own (SSL_CERT_FILE), and serves
// the one release the management cluster runs: its version, and Cluster API's metadata.yaml from
// the module. Every other path is 404, as the hosts answer for what they do not have.
type releaseHosts struct {
	listener net.Listener
	files    map[string][]byte
	tls      *tls.Config
	// CAFile is the PEM file of the CA that signed the hosts' certificate.
	CAFile string
	wg     sync.WaitGroup
}

// startReleaseHosts serves Cluster API's release version, with the metadata.yaml at
// metadataPath, until t ends.
func startReleaseHosts(t *testing.T, version, metadataPath string) *releaseHosts {
	t.Helper()
	g := NewWithT(t)
	metadata, err := os.ReadFile(metadataPath)
	g.Expect(err).NotTo(HaveOccurred())
	h := &releaseHosts{files: map[string][]byte{
		"proxy.golang.org/github.com/kubernetes-sigs/cluster-api/@v/list":                        []byte(version + "\n"),
		"github.com/kubernetes-sigs/cluster-api/releases/download/" + version + "/metadata.yaml": metadata,
	}}
	ca, cert, err := hostCertificates("proxy.golang.org", "github.com", "api.github.com")
	g.Expect(err).NotTo(HaveOccurred())
	h.CAFile = filepath.Join(t.TempDir(), "ca.pem")
	g.Expect(os.WriteFile(h.CAFile, ca, 0o600)).To(Succeed())
	h.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	h.listener, err = net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	h.wg.Add(1)
	go h.accept()
	t.Cleanup(func() { _ = h.listener.Close(); h.wg.Wait() })
	return h
}

// ProxyURL is the value of HTTPS_PROXY that sends clusterctl's requests to h.
func (h *releaseHosts) ProxyURL() string { return "http://" + h.listener.Addr().String() }

func (h *releaseHosts) accept() {
	defer h.wg.Done()
	for {
		conn, err := h.listener.Accept()
		if err != nil {
			return
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer func() { _ = conn.Close() }()
			_ = h.serveConnect(conn)
		}()
	}
}

// serveConnect answers one CONNECT as the host named, over TLS, one request at a time.
func (h *releaseHosts) serveConnect(conn net.Conn) error {
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		return err
	}
	if req.Method != http.MethodConnect {
		_, _ = io.WriteString(conn, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		return errors.New("not a CONNECT")
	}
	host, _, _ := strings.Cut(req.Host, ":")
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return err
	}
	tc := tls.Server(conn, h.tls)
	r := bufio.NewReader(tc)
	for {
		req, err := http.ReadRequest(r)
		if err != nil {
			return err
		}
		body, ok := h.files[host+req.URL.Path]
		resp := &http.Response{StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, ContentLength: int64(len(body))}
		if !ok {
			body = []byte("not found\n")
			resp.StatusCode, resp.ContentLength = http.StatusNotFound, int64(len(body))
		}
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		if err := resp.Write(tc); err != nil {
			return err
		}
	}
}

// hostCertificates returns a CA's certificate (PEM) and a serving certificate it signed for
// hosts.
func hostCertificates(hosts ...string) ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("failed to generate the CA key: %w", err)
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "release hosts CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("failed to create the CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("failed to generate the serving key: %w", err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hosts[0]}, DNSNames: hosts,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caTemplate, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("failed to create the serving certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
