package external

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
)

// The bad-input tests run against real TLS etcd clusters; each says what the backend reports
// and that no removal happens.

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func machinesOf(nodes []string) []etcd.Machine {
	out := make([]etcd.Machine, 0, len(nodes))
	for i, n := range nodes {
		out = append(out, etcd.Machine{Name: n, NodeName: n, HealthCheckSucceeded: true, UpToDate: true, Created: time.Unix(int64(i), 0)})
	}
	return out
}

// closedEndpoint returns an https URL on which nothing listens.
func closedEndpoint(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	NewWithT(t).Expect(l.Close()).To(Succeed())
	return "https://" + addr
}

// expectStillMember asserts that etcd itself still lists the member on node.
func expectStillMember(ctx context.Context, g Gomega, e *externalCluster, node string) {
	ok, err := (&faults{e: e}).HasMember(ctx, node)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue(), "etcd no longer lists the member on %s", node)
}

func TestUnreachableEndpoint(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	e := startExternal(t, mgmt, 3)
	dead := closedEndpoint(t)

	t.Run("an endpoint that does not answer is reported with why, the members that answer are healthy", func(t *testing.T) {
		g := NewWithT(t)
		b := e.backend(t, func(c *Config) { c.Endpoints = append(c.Endpoints, dead) })
		snap, err := b.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(snap.Members).To(HaveLen(3))
		var found bool
		for _, ev := range snap.Evidence {
			if ev.Contact == etcd.ContactUnreachable {
				found = true
				g.Expect(ev.Error).To(ContainSubstring(strings.TrimPrefix(dead, "https://")))
			}
		}
		g.Expect(found).To(BeTrue(), "no evidence names the endpoint %s: %+v", dead, snap.Evidence)
		v := etcd.AssessHealth(etcd.HealthInput{Snapshot: snap, Machines: machinesOf(e.nodes), Now: time.Now()})
		for _, n := range e.nodes {
			g.Expect(v.Machines[n].Status).To(Equal(metav1.ConditionTrue), v.Machines[n].Message)
		}
	})

	t.Run("no endpoint answering is ErrUnreachable and no removal", func(t *testing.T) {
		g := NewWithT(t)
		healthy, err := e.backend(t).Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		b := e.backend(t, func(c *Config) { c.Endpoints = []string{dead} })
		_, err = b.Observe(ctx)
		g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "want ErrUnreachable, got %v", err)
		m, _ := healthy.MemberByNode(e.nodes[1])
		_, err = b.RemoveMember(ctx, m)
		g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "want ErrUnreachable, got %v", err)
		expectStillMember(ctx, g, e, e.nodes[1])
	})
	g.Expect(e.nodes).To(HaveLen(3))
}

func TestWrongCredentials(t *testing.T) {
	ctx := testContext(t)
	e := startExternal(t, mgmt, 3)
	healthy, err := e.backend(t).Observe(ctx)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	other, err := pki.NewCA()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	foreignClient, err := other.NewClientCert("kube-apiserver-etcd-client")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	tests := []struct {
		name   string
		ca     []byte
		client pki.KeyPair
	}{
		{name: "a CA that did not sign the members' certificates refuses them", ca: other.CertPEM(), client: e.client},
		{name: "a client certificate of another cluster's CA is refused by the members", ca: e.etcd.CA().CertPEM(), client: foreignClient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(e.writeSecrets(ctx, tt.ca, tt.client)).To(Succeed())
			t.Cleanup(func() { _ = e.writeSecrets(context.Background(), e.etcd.CA().CertPEM(), e.client) })
			b := e.backend(t)
			_, err := b.Observe(ctx)
			g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue(), "want ErrInvalidInput, got %v", err)
			for _, m := range e.etcd.Members() {
				g.Expect(err.Error()).To(ContainSubstring(m.ClientAddress()), "the error names every endpoint and why")
			}
			m, _ := healthy.MemberByNode(e.nodes[1])
			_, err = b.RemoveMember(ctx, m)
			g.Expect(err).To(HaveOccurred())
			expectStillMember(ctx, g, e, e.nodes[1])
		})
	}
}

func TestEndpointsOfTwoClusters(t *testing.T) {
	ctx := testContext(t)
	a := startExternal(t, mgmt, 3)
	// b shares a's CA and client certificate, as two clusters issued by one CA would.
	sep, err := a.etcd.StartSeparate(ctx, "stranger")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	stranger := sep.Members()[0].ClientURL()

	t.Run("an endpoint of another cluster is reported on its own, with its cluster ID, and makes the cluster not healthy", func(t *testing.T) {
		g := NewWithT(t)
		b := a.backend(t, func(c *Config) { c.Endpoints = append(c.Endpoints, stranger) })
		snap, err := b.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(snap.Members).To(HaveLen(3), "the stranger is never merged into the member list")
		var ev etcd.MemberEvidence
		for _, x := range snap.Evidence {
			if x.MemberID == sep.Members()[0].ID() {
				ev = x
			}
		}
		g.Expect(ev.Error).To(ContainSubstring(fmt.Sprintf("answers for etcd cluster %x", ev.ClusterID)))
		v := etcd.AssessHealth(etcd.HealthInput{Snapshot: snap, Machines: machinesOf(a.nodes), Now: time.Now()})
		g.Expect(v.Cluster.Status).NotTo(Equal(metav1.ConditionTrue), v.Cluster.Message)

		m, _ := snap.MemberByNode(a.nodes[1])
		_, err = b.RemoveMember(ctx, m)
		g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue(), "want ErrInvalidInput, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("two clusters"))
		expectStillMember(ctx, g, a, a.nodes[1])
	})

	t.Run("endpoints of two clusters in equal numbers are refused, not guessed", func(t *testing.T) {
		g := NewWithT(t)
		b := a.backend(t, func(c *Config) { c.Endpoints = []string{c.Endpoints[0], stranger} })
		_, err := b.Observe(ctx)
		g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue(), "want ErrInvalidInput, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("equal numbers"))
	})
}
