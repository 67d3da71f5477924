package etcdcluster

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
)

func TestCluster_Close(t *testing.T) {
	g := NewWithT(t)
	// Goroutines of other tests still winding down are not this test's business.
	ignore := goleak.IgnoreCurrent()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	c, err := Start(ctx, Options{Members: Nodes("node", 3)})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.StartSeparate(ctx, "node-0")
	g.Expect(err).NotTo(HaveOccurred())
	cli, err := c.NewClient(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cli.Put(ctx, "k", "v")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cli.Close()).To(Succeed())

	var addrs []string
	for _, m := range append(c.Members(), c.separates[0].Members()...) {
		addrs = append(addrs, m.ClientAddress(), hostPort(m.PeerURL()))
	}
	g.Expect(c.Close()).To(Succeed())
	g.Expect(c.Close()).To(Succeed(), "Close is idempotent")

	g.Expect(c.Dir()).NotTo(BeADirectory())
	g.Expect(c.separates[0].Dir()).NotTo(BeADirectory())
	for _, addr := range addrs {
		host, port, err := net.SplitHostPort(addr)
		g.Expect(err).NotTo(HaveOccurred())
		p, err := strconv.Atoi(port)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(isFree(host, p)).To(BeTrue(), "nothing listens on %s", addr)
	}
	g.Eventually(func() error { return goleak.Find(ignore) }, 10*time.Second).Should(Succeed())
}

// hostPort strips the scheme from a URL.
func hostPort(u string) string { return u[len("https://"):] }
