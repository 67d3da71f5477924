package fake

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func TestCluster_recordsCallsAndReturnsScriptedAnswers(t *testing.T) {
	g := NewWithT(t)
	cp0 := etcd.Member{ID: 10, Name: "cp-0", NodeName: "cp-0"}
	cp1 := etcd.Member{ID: 11, Name: "cp-1", NodeName: "cp-1"}
	cp2 := etcd.Member{ID: 12, Name: "cp-2", NodeName: "cp-2"}
	c := &Cluster{RemoveMemberResponses: map[uint64]etcd.Removal{cp1.ID: {State: etcd.RemovalRejected, Reason: "too few started members"}}}

	r, err := c.RemoveMember(context.Background(), cp1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.State).To(Equal(etcd.RemovalRejected))
	r, _ = c.RemoveMember(context.Background(), cp2)
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved))
	g.Expect(r.Member).To(Equal(cp2))
	_, _ = c.MoveLeader(context.Background(), cp0, cp2)

	g.Expect(c.RemovedMembers).To(Equal([]etcd.Member{cp1, cp2}))
	g.Expect(c.MovedLeader).To(Equal([][2]etcd.Member{{cp0, cp2}}))
}
