package fake

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func TestCluster_recordsCallsAndReturnsScriptedAnswers(t *testing.T) {
	g := NewWithT(t)
	c := &Cluster{RemoveMemberResponses: map[string]etcd.Removal{"cp-1": {State: etcd.RemovalRejected, Reason: "too few started members"}}}

	r, err := c.RemoveMember(context.Background(), "cp-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.State).To(Equal(etcd.RemovalRejected))
	r, _ = c.RemoveMember(context.Background(), "cp-2")
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved))
	_, _ = c.MoveLeader(context.Background(), "cp-0", "cp-2")

	g.Expect(c.RemovedMembers).To(Equal([]string{"cp-1", "cp-2"}))
	g.Expect(c.MovedLeader).To(Equal([][2]string{{"cp-0", "cp-2"}}))
}
