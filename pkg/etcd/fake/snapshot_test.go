package fake_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
)

func TestHealthyCluster(t *testing.T) {
	g := NewWithT(t)
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	s, machines := fake.HealthyCluster(3, at)
	g.Expect(machines).To(HaveLen(3))
	fake.Unreachable(s, 2)
	health := map[string]etcd.Health{}
	for _, mh := range etcd.AssessMembers(s, at) {
		health[mh.Member.NodeName] = mh.Health
	}
	g.Expect(health).To(Equal(map[string]etcd.Health{"cp-0": etcd.Healthy, "cp-1": etcd.Healthy, "cp-2": etcd.Unhealthy}))
	leader, ok := s.Leader()
	g.Expect(ok).To(BeTrue())
	g.Expect(leader.NodeName).To(Equal("cp-0"))
	g.Expect(etcd.CanRemoveMember(s, at, s.Members[2]).Allowed).To(BeTrue(), "removing the member that does not answer keeps 2 of 2")
	g.Expect(etcd.CanRemoveMember(s, at, s.Members[1]).Allowed).To(BeFalse(), "removing a healthy one leaves 1 healthy of 2")
}
