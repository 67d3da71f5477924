package k3sbackend_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// TestBackend_withoutHealth covers the K3s versions the conformance suite does not run on,
// because they publish no member health on Nodes: before 1.25.16 / 1.26.11 / 1.27.8 / 1.28.4 no
// EtcdIsVoter at all, and until 1.26.13 / 1.27.10 / 1.28.6 / 1.29.1 one without a health check.
// Every member is Unknown with a reason that says so, the cluster is never healthy, and a
// caller that removes what the quorum projection allows removes nothing, even with a member
// down that K3s would report as a healthy voter.
func TestBackend_withoutHealth(t *testing.T) {
	for _, tt := range []struct{ version, reason string }{
		{version: "v1.26.5+k3s1", reason: "writes no EtcdIsVoter condition"},
		{version: "v1.28.4+k3s1", reason: "checks no member health"},
	} {
		t.Run(tt.version, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := context.Background()
			c := startCluster(t, tt.version, 3, clusterOptions{})
			down := c.follower(g)
			g.Expect(c.sim.Quiesced(c.etcd.Member(c.memberOf(down).Name).Kill)).To(Succeed())
			s, err := c.backend.Observe(ctx)
			g.Expect(err).ToNot(HaveOccurred())
			g.Expect(s.Members).To(HaveLen(3))
			for _, ev := range s.Evidence {
				g.Expect(ev.Contact).To(Equal(etcd.ContactUnknown))
				g.Expect(ev.Error).To(ContainSubstring(tt.reason))
			}
			g.Expect(healthOf(c.nodes)(s)).To(Equal(v1alpha1.EtcdClusterHealthUnknownReason))
			for _, node := range c.nodes {
				v := etcd.CanRemoveMember(s, time.Now(), c.memberOf(node))
				g.Expect(v.Allowed).To(BeFalse(), "%s: %s", node, v.Message)
			}
			for _, node := range c.nodes {
				g.Expect(c.node(g, node).Annotations).ToNot(HaveKey(c.keys.Remove))
				g.Expect(c.hasMember(g, c.memberOf(node).Name)).To(BeTrue())
			}
		})
	}
}
