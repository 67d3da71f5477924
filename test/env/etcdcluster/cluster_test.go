package etcdcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
)

// startCluster starts a cluster of n members on Nodes "<t.Name()>-i" and closes it at the end
// of the test.
func startCluster(t *testing.T, n int) *Cluster {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	c, err := Start(ctx, Options{Members: Nodes("node", n)})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("%d-member etcd cluster ready in %v", n, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { g.Expect(c.Close()).To(Succeed()) })
	return c
}

// memberList asks one member for the member list.
func memberList(ctx context.Context, m *Member) (*clientv3.MemberListResponse, error) {
	cli, err := m.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cli.Close() }()
	return cli.MemberList(ctx)
}

func TestStart(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("%d members answer MemberList over TLS", n), func(t *testing.T) {
			g := NewWithT(t)
			c := startCluster(t, n)
			var clusterIDs []uint64
			for i, m := range c.Members() {
				g.Expect(m.Name()).To(Equal(fmt.Sprintf("node-%d", i)))
				g.Expect(m.NodeName()).To(Equal(m.Name()))
				resp, err := memberList(t.Context(), m)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(resp.Members).To(HaveLen(n))
				g.Expect(resp.Header.MemberId).To(Equal(m.ID()))
				clusterIDs = append(clusterIDs, resp.Header.ClusterId)
			}
			g.Expect(clusterIDs).To(HaveEach(clusterIDs[0]))
		})
	}
}

func TestStart_rejectsWrongCA(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 1)
	other, err := pki.NewCA()
	g.Expect(err).NotTo(HaveOccurred())
	kp, err := other.NewClientCert(pki.KCPClientCommonName)
	g.Expect(err).NotTo(HaveOccurred())

	t.Run("client certificate from another CA", func(t *testing.T) {
		g := NewWithT(t)
		cfg, err := c.Members()[0].ClientConfig()
		g.Expect(err).NotTo(HaveOccurred())
		cfg.TLS, err = c.CA().ClientTLSConfig(kp, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(connectAndList(t.Context(), cfg)).NotTo(Succeed())
	})
	t.Run("server verified against another CA", func(t *testing.T) {
		g := NewWithT(t)
		cfg, err := c.Members()[0].ClientConfig()
		g.Expect(err).NotTo(HaveOccurred())
		cfg.TLS.RootCAs = other.CertPool()
		g.Expect(connectAndList(t.Context(), cfg)).NotTo(Succeed())
	})
	t.Run("no client certificate", func(t *testing.T) {
		g := NewWithT(t)
		cfg, err := c.Members()[0].ClientConfig()
		g.Expect(err).NotTo(HaveOccurred())
		cfg.TLS.Certificates = nil
		g.Expect(connectAndList(t.Context(), cfg)).NotTo(Succeed())
	})
}

func TestWithServerName(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 1)
	m := c.Members()[0]
	cfg, err := m.ClientConfig()
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(connectAndList(t.Context(), WithServerName(cfg, m.NodeName()))).To(Succeed(), "the Node name is in the certificate")
	g.Expect(connectAndList(t.Context(), WithServerName(cfg, "other-node"))).NotTo(Succeed(), "another name is not")
	g.Expect(cfg.TLS.ServerName).To(BeEmpty(), "cfg is not modified")
}

// connectAndList connects with cfg and lists members, within two seconds.
func connectAndList(ctx context.Context, cfg clientv3.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cfg.DialTimeout = 2 * time.Second
	cli, err := NewClient(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	_, err = cli.MemberList(ctx)
	return err
}
