package etcdcluster

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestMemberRemoveCalls removes a member, then asks again: the log holds both calls as etcd
// answered them (removed, then not found), so a test can count removals from etcd's side.
func TestMemberRemoveCalls(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cli, err := c.Members()[0].NewClient(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cli.Close() }()
	id := c.Members()[2].ID()
	g.Eventually(func() error { _, err := cli.MemberRemove(ctx, id); return err }, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	_, err = cli.MemberRemove(ctx, id)
	g.Expect(err).To(HaveOccurred())
	calls := c.MemberRemoveCalls()
	g.Expect(calls).NotTo(BeEmpty())
	last := calls[len(calls)-1]
	g.Expect(last).To(Equal(RemoveCall{ID: id, NotFound: true}))
	g.Expect(calls[len(calls)-2]).To(Equal(RemoveCall{ID: id, Removed: true}))
}
