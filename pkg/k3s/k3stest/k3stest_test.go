package k3stest_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s/k3stest"
)

var now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func TestSnapshot(t *testing.T) {
	g := NewWithT(t)
	s, err := k3stest.Snapshot(now,
		k3stest.Node("cp-0", "cp-0-1a2b3c4d", "10.0.0.1", "v1.34.2+k3s1", now),
		k3stest.Node("cp-1", "cp-1-1a2b3c4d", "10.0.0.2", "v1.34.2+k3s1", now, k3stest.Unreachable()),
		k3stest.Node("cp-2", "cp-2-1a2b3c4d", "10.0.0.3", "v1.34.2+k3s1", now, k3stest.Learner()),
		k3stest.Node("cp-3", "cp-3-1a2b3c4d", "10.0.0.4", "v1.34.2+k3s1", now, k3stest.Heartbeat(now.Add(-10*time.Minute))),
	)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.SyntheticMemberIDs).To(BeTrue())
	g.Expect(s.Blind(etcd.BlindSpotGhostMembers)).To(BeTrue())
	health := map[string]etcd.Health{}
	for _, mh := range etcd.AssessMembers(s, now) {
		health[mh.Member.NodeName] = mh.Health
	}
	g.Expect(health).To(Equal(map[string]etcd.Health{
		"cp-0": etcd.Healthy, "cp-1": etcd.Unhealthy, "cp-2": etcd.Healthy, "cp-3": etcd.Unknown,
	}))
	m, ok := s.MemberByNode("cp-2")
	g.Expect(ok).To(BeTrue())
	g.Expect(m.IsLearner).To(BeTrue())
	g.Expect(m.ID).To(Equal(k3s.MemberID("cp-2-1a2b3c4d")))
}

func TestSnapshot_rke2Keys(t *testing.T) {
	g := NewWithT(t)
	s, err := k3stest.Snapshot(now, k3stest.Node("cp-0", "cp-0-1a2b3c4d", "10.0.0.1", "v1.34.2+rke2r1", now))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Members).To(HaveLen(1))
	g.Expect(s.Members[0].PeerURLs).To(Equal([]string{"https://10.0.0.1:2380"}))
}
