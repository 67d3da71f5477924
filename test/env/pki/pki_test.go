package pki

import (
	"crypto/x509"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestCA_NewServerCert(t *testing.T) {
	g := NewWithT(t)
	ca, err := NewCA()
	g.Expect(err).NotTo(HaveOccurred())

	kp, err := ca.NewServerCert("cp-0", net.IPv4(10, 0, 0, 1))
	g.Expect(err).NotTo(HaveOccurred())
	cert, err := certs.DecodeCertPEM(kp.Cert)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(cert.Subject.CommonName).To(Equal("cp-0"))
	g.Expect(cert.DNSNames).To(ConsistOf("cp-0", "localhost"))
	for _, name := range []string{"cp-0", "localhost", "127.0.0.1", "10.0.0.1", "::1"} {
		_, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: ca.CertPool(), CurrentTime: time.Now()})
		g.Expect(err).NotTo(HaveOccurred(), name)
	}
	_, err = cert.Verify(x509.VerifyOptions{DNSName: "cp-1", Roots: ca.CertPool()})
	g.Expect(err).To(HaveOccurred())
}

func TestCA_NewClientCert(t *testing.T) {
	g := NewWithT(t)
	ca, err := NewCA()
	g.Expect(err).NotTo(HaveOccurred())

	kp, err := ca.NewClientCert(KCPClientCommonName)
	g.Expect(err).NotTo(HaveOccurred())
	cert, err := certs.DecodeCertPEM(kp.Cert)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cert.ExtKeyUsage).To(ConsistOf(x509.ExtKeyUsageClientAuth))
	_, err = cert.Verify(x509.VerifyOptions{Roots: ca.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = ca.ClientTLSConfig(kp, "cp-0")
	g.Expect(err).NotTo(HaveOccurred())
}

func TestCA_Secret(t *testing.T) {
	g := NewWithT(t)
	ca, err := NewCA()
	g.Expect(err).NotTo(HaveOccurred())

	s := ca.Secret(client.ObjectKey{Namespace: "ns", Name: "c1"})
	g.Expect(s.Name).To(Equal("c1-etcd"))
	g.Expect(s.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/cluster-name", "c1"))
	g.Expect(s.OwnerReferences).To(BeEmpty())

	loaded, err := CAFromSecret(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loaded.Certificate().Equal(ca.Certificate())).To(BeTrue())
	g.Expect(loaded.Certificate().IsCA).To(BeTrue())
}

func TestKeyPair_WriteFiles(t *testing.T) {
	g := NewWithT(t)
	ca, err := NewCA()
	g.Expect(err).NotTo(HaveOccurred())
	kp, err := ca.NewClientCert("x")
	g.Expect(err).NotTo(HaveOccurred())

	certFile, keyFile, err := kp.WriteFiles(t.TempDir()+"/sub", "client")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(certFile).To(BeAnExistingFile())
	g.Expect(keyFile).To(BeAnExistingFile())
}
