package pki

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
)

// KeyPair is a PEM-encoded certificate and its private key.
type KeyPair struct {
	// Cert is the PEM-encoded certificate.
	Cert []byte
	// Key is the PEM-encoded private key.
	Key []byte
}

// TLSCertificate parses the pair for use in a tls.Config.
func (kp KeyPair) TLSCertificate() (tls.Certificate, error) {
	c, err := tls.X509KeyPair(kp.Cert, kp.Key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("failed to parse key pair: %w", err)
	}
	return c, nil
}

// WriteFiles writes the pair as dir/<base>.crt and dir/<base>.key (mode 0600), the form
// etcd's file-based TLS configuration needs, and returns both paths.
func (kp KeyPair) WriteFiles(dir, base string) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, base+".crt")
	keyFile = filepath.Join(dir, base+".key")
	if err := WritePEM(certFile, kp.Cert); err != nil {
		return "", "", err
	}
	if err := WritePEM(keyFile, kp.Key); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// WritePEM writes PEM data to path with mode 0600, creating the parent directory.
func WritePEM(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("failed to create directory for %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return nil
}
