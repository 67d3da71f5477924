package workload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"sigs.k8s.io/cluster-api/util/secret"

	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// TestStartExternal starts an external etcd and checks that a client built only from the
// Secrets it names (as etcd-adapter's external backend builds one) reaches every member at the
// published endpoints.
func TestStartExternal(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	x, err := StartExternal(ctx, ExternalOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(x.Close()).To(Succeed()) })
	g.Expect(x.APIServer).NotTo(BeNil())
	g.Expect(x.Nodes).To(BeEmpty(), "no Node hosts an external member")

	secrets := x.Secrets("ns", "c1")
	g.Expect(secrets).To(HaveLen(2))
	g.Expect(secrets[0].Name).To(Equal("c1-etcd"))
	g.Expect(secrets[0].Data).To(HaveKey(secret.TLSCrtDataName))
	g.Expect(secrets[0].Data).NotTo(HaveKey(secret.TLSKeyDataName), "the CA key stays with etcd's owner")
	g.Expect(secrets[1].Name).To(Equal("c1-apiserver-etcd-client"))

	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(secrets[0].Data[secret.TLSCrtDataName])).To(BeTrue())
	cert, err := tls.X509KeyPair(secrets[1].Data[secret.TLSCrtDataName], secrets[1].Data[secret.TLSKeyDataName])
	g.Expect(err).NotTo(HaveOccurred())
	urls := x.ClientURLs()
	g.Expect(urls).To(HaveLen(3))
	for i, u := range urls {
		cli, err := etcdcluster.NewClient(ctx, clientv3.Config{
			Endpoints: []string{u},
			TLS:       &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		})
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := cli.MemberList(ctx)
		_ = cli.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Header.MemberId).To(Equal(x.Etcd.Members()[i].ID()), "endpoint %d is member %d", i, i)
		g.Expect(resp.Members).To(HaveLen(3))
	}
}
