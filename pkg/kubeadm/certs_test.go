package kubeadm

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
)

var testCluster = client.ObjectKey{Namespace: "ns", Name: "c1"}

func caSecret(g Gomega, mutate func(map[string][]byte)) (*corev1.Secret, *pki.CA) {
	ca, err := pki.NewCA()
	g.Expect(err).NotTo(HaveOccurred())
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1-etcd"},
		Data:       map[string][]byte{"tls.crt": ca.CertPEM(), "tls.key": ca.KeyPEM()},
	}
	if mutate != nil {
		mutate(s.Data)
	}
	return s, ca
}

func sourceFor(objs []client.Object, mutate ...func(*Config)) *certSource {
	sch := runtime.NewScheme()
	_ = corev1.AddToScheme(sch)
	c := fake.NewClientBuilder().WithScheme(sch).WithObjects(objs...).Build()
	cfg := Config{Cluster: testCluster, ClusterUID: "uid-1", RESTConfig: StaticRESTConfig(nil), Client: c}
	for _, m := range mutate {
		m(&cfg)
	}
	cfg, _ = cfg.withDefaults()
	return &certSource{cfg: cfg}
}

func Test_certSource_get(t *testing.T) {
	g := NewWithT(t)
	s, ca := caSecret(g, nil)
	src := sourceFor([]client.Object{s})
	now := time.Now()

	creds, rotated, err := src.get(context.Background(), now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rotated).To(BeTrue(), "the first certificate is new")
	leaf := creds.client.Leaf
	g.Expect(leaf.Subject.CommonName).To(Equal(ClientCommonName))
	g.Expect(leaf.ExtKeyUsage).To(Equal([]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}))
	g.Expect(leaf.NotAfter.Sub(now)).To(BeNumerically("~", DefaultCertTTL, time.Minute), "short-lived, never 10 years")
	g.Expect(leaf.PublicKey).To(BeAssignableToTypeOf(&rsa.PublicKey{}))
	g.Expect(leaf.PublicKey.(*rsa.PublicKey).N.BitLen()).To(Equal(2048))
	g.Expect(creds.client.PrivateKey).To(BeAssignableToTypeOf(&rsa.PrivateKey{}))
	_, err = leaf.Verify(x509.VerifyOptions{Roots: ca.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	g.Expect(err).NotTo(HaveOccurred(), "signed by the CA in the Secret")

	again, rotated, err := src.get(context.Background(), now.Add(time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rotated).To(BeFalse())
	g.Expect(again).To(BeIdenticalTo(creds), "cached")

	renewed, rotated, err := src.get(context.Background(), now.Add(17*time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rotated).To(BeFalse(), "same CA: connections may stay")
	g.Expect(renewed).NotTo(BeIdenticalTo(creds), "renewed after two thirds of its life")

	other, _ := caSecret(g, nil)
	s.Data = other.Data
	g.Expect(src.cfg.Client.(client.Client).Update(context.Background(), s)).To(Succeed())
	newCA, rotated, err := src.get(context.Background(), now.Add(17*time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rotated).To(BeTrue(), "a rotated CA is picked up at once")
	g.Expect(newCA.fingerprint).NotTo(Equal(renewed.fingerprint))
}

func Test_certSource_get_ECDSA(t *testing.T) {
	g := NewWithT(t)
	s, _ := caSecret(g, nil)
	src := sourceFor([]client.Object{s}, func(c *Config) { c.KeyAlgorithm = KeyECDSAP256; c.CertTTL = time.Hour })
	creds, _, err := src.get(context.Background(), time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(creds.client.Leaf.PublicKey).To(BeAssignableToTypeOf(&ecdsa.PublicKey{}))
	g.Expect(time.Until(creds.client.Leaf.NotAfter)).To(BeNumerically("<=", time.Hour))
}

func Test_certSource_get_errors(t *testing.T) {
	other, err := pki.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		mutate  func(map[string][]byte)
		missing bool
		now     time.Time
		want    string
	}{
		{name: "missing Secret", missing: true, want: "etcd CA Secret ns/c1-etcd not found"},
		{name: "missing key", mutate: func(d map[string][]byte) { delete(d, "tls.key") }, want: "etcd CA Secret ns/c1-etcd has no tls.key"},
		{name: "missing certificate", mutate: func(d map[string][]byte) { delete(d, "tls.crt") }, want: "etcd CA Secret ns/c1-etcd has no tls.crt"},
		{name: "unparsable certificate", mutate: func(d map[string][]byte) { d["tls.crt"] = []byte("garbage") }, want: "tls.crt is not a PEM certificate"},
		{name: "unparsable key", mutate: func(d map[string][]byte) { d["tls.key"] = []byte("garbage") }, want: "tls.key is not a PEM private key"},
		{name: "key of another CA", mutate: func(d map[string][]byte) { d["tls.key"] = other.KeyPEM() }, want: "tls.key does not belong to any certificate"},
		{name: "expired CA", now: time.Now().Add(20 * 365 * 24 * time.Hour), want: "the CA certificate expired at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s, _ := caSecret(g, tt.mutate)
			var objs []client.Object
			if !tt.missing {
				objs = append(objs, s)
			}
			now := tt.now
			if now.IsZero() {
				now = time.Now()
			}
			_, _, err := sourceFor(objs).get(context.Background(), now)
			g.Expect(err).To(HaveOccurred())
			g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue())
			g.Expect(err.Error()).To(ContainSubstring(tt.want))
		})
	}
}

func Test_certSource_get_keyAlgorithms(t *testing.T) {
	tests := []struct {
		alg  KeyAlgorithm
		want func(g Gomega, pub any)
	}{
		{alg: KeyRSA3072, want: func(g Gomega, pub any) {
			g.Expect(pub).To(BeAssignableToTypeOf(&rsa.PublicKey{}))
			g.Expect(pub.(*rsa.PublicKey).N.BitLen()).To(Equal(3072))
		}},
		{alg: KeyECDSAP384, want: func(g Gomega, pub any) {
			g.Expect(pub).To(BeAssignableToTypeOf(&ecdsa.PublicKey{}))
			g.Expect(pub.(*ecdsa.PublicKey).Curve.Params().Name).To(Equal("P-384"))
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.alg), func(t *testing.T) {
			g := NewWithT(t)
			s, _ := caSecret(g, nil)
			creds, _, err := sourceFor([]client.Object{s}, func(c *Config) { c.KeyAlgorithm = tt.alg }).get(context.Background(), time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			tt.want(g, creds.client.Leaf.PublicKey)
		})
	}
}

func Test_certSource_get_mintingFailureIsClassified(t *testing.T) {
	g := NewWithT(t)
	s, _ := caSecret(g, nil)
	// An algorithm CAPI's signer does not know (withDefaults would refuse it up front).
	_, _, err := sourceFor([]client.Object{s}, func(c *Config) { c.KeyAlgorithm = "DSA-1024" }).get(context.Background(), time.Now())
	g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("failed to generate the etcd client key"))
}

func Test_certSource_get_trustsEveryCAOfTheBundle(t *testing.T) {
	g := NewWithT(t)
	// A CA rotation in progress: tls.crt holds the new and the old CA, tls.key the new one's key.
	s, newCA := caSecret(g, nil)
	oldCA, err := pki.NewCA()
	g.Expect(err).NotTo(HaveOccurred())
	s.Data["tls.crt"] = append(append([]byte{}, newCA.CertPEM()...), oldCA.CertPEM()...)
	creds, _, err := sourceFor([]client.Object{s}).get(context.Background(), time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	for _, ca := range []*pki.CA{newCA, oldCA} {
		kp, err := ca.NewServerCert("node-a")
		g.Expect(err).NotTo(HaveOccurred())
		server, err := kp.TLSCertificate()
		g.Expect(err).NotTo(HaveOccurred())
		_, err = server.Leaf.Verify(x509.VerifyOptions{Roots: creds.roots, DNSName: "node-a"})
		g.Expect(err).NotTo(HaveOccurred(), "a member still serving a certificate of either CA is trusted")
	}
	_, err = creds.client.Leaf.Verify(x509.VerifyOptions{Roots: newCA.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	g.Expect(err).NotTo(HaveOccurred(), "signed by the CA tls.key belongs to")
}

func Test_certSource_get_uncachedFallback(t *testing.T) {
	g := NewWithT(t)
	s, _ := caSecret(g, nil)
	sch := runtime.NewScheme()
	_ = corev1.AddToScheme(sch)
	// The cached reader does not see the Secret (its informer selects by label, or it is new).
	cached := fake.NewClientBuilder().WithScheme(sch).Build()
	api := fake.NewClientBuilder().WithScheme(sch).WithObjects(s).Build()
	src := sourceFor(nil, func(c *Config) { c.Client = cached })
	_, _, err := src.get(context.Background(), time.Now())
	g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue(), "without an API reader: not found")
	src = sourceFor(nil, func(c *Config) { c.Client, c.APIReader = cached, api })
	_, _, err = src.get(context.Background(), time.Now())
	g.Expect(err).NotTo(HaveOccurred(), "read through the API reader")
}

func TestConfig_withDefaults(t *testing.T) {
	g := NewWithT(t)
	_, err := Config{}.withDefaults()
	g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue())
	cfg, err := Config{Cluster: testCluster, RESTConfig: StaticRESTConfig(nil), Client: fake.NewClientBuilder().Build()}.withDefaults()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.DialTimeout).To(Equal(10 * time.Second))
	g.Expect(cfg.CallTimeout).To(Equal(15 * time.Second))
	g.Expect(cfg.CertTTL).To(Equal(24 * time.Hour))
	g.Expect(cfg.KeyAlgorithm).To(Equal(KeyRSA2048))
	_, err = Config{Cluster: testCluster, RESTConfig: StaticRESTConfig(nil), Client: fake.NewClientBuilder().Build(), KeyAlgorithm: "DSA"}.withDefaults()
	g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue())
}
