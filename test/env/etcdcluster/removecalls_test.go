package etcdcluster

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestMemberRemoveCalls removes a member, then asks again: the log holds both calls as etcd
// answered them (removed, then not found), so a test can count removals from etcd's side.
//
// Each call has its own deadline and is retried until etcd gives the answer the step expects:
// on a loaded machine a call can time out on the client before or after the server answered,
// and only the server's answers are in the log.
func TestMemberRemoveCalls(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)
	cli, err := c.Members()[0].NewClient(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cli.Close() }()
	id := c.Members()[2].ID()
	remove := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err := cli.MemberRemove(ctx, id)
		return err
	}
	g.Eventually(func() error {
		if err := remove(); err != nil && !errors.Is(err, rpctypes.ErrMemberNotFound) {
			return err
		}
		return nil
	}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Eventually(remove, time.Minute, 200*time.Millisecond).Should(MatchError(rpctypes.ErrMemberNotFound))

	var removed, notFound int
	for _, call := range c.MemberRemoveCalls() {
		g.Expect(call.ID).To(Equal(id))
		if call.Removed {
			removed++
		}
		if call.NotFound {
			notFound++
		}
	}
	g.Expect(removed).To(Equal(1), "etcd removes a member once")
	g.Expect(notFound).To(BeNumerically(">=", 1), "asking again is answered not found")
	calls := c.MemberRemoveCalls()
	g.Expect(calls[len(calls)-1]).To(Equal(RemoveCall{ID: id, NotFound: true}))
}
