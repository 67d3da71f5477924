package external

import (
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// The egress tests play a workload cluster whose etcd points the manager at an address of the
// management network: a listener the test owns stands for it and counts the connections that
// reach it. None may.

// countingListener accepts and closes connections on ip, counting them.
func countingListener(t *testing.T, ip string) (string, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			_ = c.Close()
		}
	}()
	return "https://" + l.Addr().String(), &n
}

func TestMemberClientURLNotConfigured(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	trap, accepted := countingListener(t, etcdcluster.DefaultIP)
	// The second member advertises the trap besides its own client URL, and neither is a
	// configured endpoint: only the first member's is.
	e := startExternal(t, mgmt, 2, func(specs []etcdcluster.MemberSpec) { specs[1].AdvertiseClientURLs = []string{trap} })
	first, second := e.etcd.Members()[0], e.etcd.Members()[1]
	b := e.backend(t, func(c *Config) { c.Endpoints = []string{first.ClientURL()} })

	// A member list read once is followed on the next observation: observe a few times.
	for range 3 {
		snap, err := b.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(snap.Members).To(HaveLen(2))
		m, ok := snap.MemberByNode(second.NodeName())
		g.Expect(ok).To(BeTrue(), "no member on %s in %v", second.NodeName(), snap.Members)
		g.Expect(m.ClientURLs).To(ContainElement(trap), "the member does not advertise the trap")
		ev, ok := snap.EvidenceFor(m.ID)
		g.Expect(ok).To(BeTrue())
		g.Expect(ev.Contact).To(Equal(etcd.ContactUnknown), ev.Error)
		g.Expect(ev.Error).To(ContainSubstring("none of which is a configured etcd endpoint"))

		v := etcd.AssessHealth(etcd.HealthInput{Snapshot: snap, Machines: machinesOf(e.nodes), Now: time.Now(), MembersOffMachines: true})
		g.Expect(v.Machines[second.NodeName()].Status).To(Equal(metav1.ConditionUnknown), v.Machines[second.NodeName()].Message)
		g.Expect(v.Machines[first.NodeName()].Status).To(Equal(metav1.ConditionTrue), v.Machines[first.NodeName()].Message)
	}
	g.Expect(accepted.Load()).To(BeZero(), "a client URL the member reported was dialled")
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	g.Expect(e.net.open).NotTo(HaveKey(second.ClientAddress()), "the member's own client URL, not configured, was dialled")
}

func TestAllowedNetworks(t *testing.T) {
	ctx := testContext(t)
	e := startExternal(t, mgmt, 1)
	forbidden := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}

	t.Run("an endpoint outside the networks is refused before any dial", func(t *testing.T) {
		g := NewWithT(t)
		trap, accepted := countingListener(t, etcdcluster.DefaultIP)
		_, port, err := net.SplitHostPort(trap[len("https://"):])
		g.Expect(err).NotTo(HaveOccurred())
		// By address and by a name that resolves into the loopback network.
		for _, ep := range []string{trap, "https://localhost:" + port} {
			b := e.backend(t, func(c *Config) { c.Endpoints, c.DialContext, c.AllowedNetworks = []string{ep}, nil, forbidden })
			_, err := b.Observe(ctx)
			g.Expect(errors.Is(err, etcd.ErrEndpointNotAllowed)).To(BeTrue(), "%s: want ErrEndpointNotAllowed, got %v", ep, err)
			g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue())
			g.Expect(err.Error()).To(ContainSubstring(classNotAllowed))
			v := etcd.AssessHealth(etcd.HealthInput{ObserveErr: err, Now: time.Now()})
			g.Expect(v.Cluster.Status).To(Equal(metav1.ConditionUnknown))
			g.Expect(v.Cluster.Reason).To(Equal(v1alpha1.EtcdClusterEndpointNotAllowedReason), v.Cluster.Message)
		}
		g.Expect(accepted.Load()).To(BeZero(), "a connection reached the endpoint outside the allowed networks")
	})

	t.Run("the members inside are observed, the endpoint outside is not dialled", func(t *testing.T) {
		g := NewWithT(t)
		// 127.0.0.2 is loopback too, outside 127.0.0.1/32.
		trap, accepted := countingListener(t, "127.0.0.2")
		b := e.backend(t, func(c *Config) {
			c.Endpoints, c.DialContext = append(e.endpoints(), trap), nil
			c.AllowedNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		})
		snap, err := b.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(snap.Members).To(HaveLen(1))
		ev, ok := evidenceNaming(snap, trap)
		g.Expect(ok).To(BeTrue(), "no evidence names %s: %+v", trap, snap.Evidence)
		g.Expect(ev.Contact).To(Equal(etcd.ContactUnknown))
		g.Expect(ev.Error).To(Equal("etcd at " + trap + ": " + classNotAllowed))
		g.Expect(accepted.Load()).To(BeZero(), "a connection reached the endpoint outside the allowed networks")
	})
}
