package e2e

import (
	"context"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/controlplaneetcd"
)

var _ = Describe("Crash safety of the removal flow", func() {
	It("converges after the controller stops at each step boundary: no member removed twice, no other member removed, no hook left", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1", members: 5})
		c.expectMembers(ctx, 5)
		steps := map[string]string{
			"cp-4": controlplaneetcd.StepQuorumChecked,
			"cp-3": controlplaneetcd.StepRemovalRequested,
			"cp-2": controlplaneetcd.StepRemovedBeforeRelease,
		}
		for _, node := range []string{"cp-4", "cp-3", "cp-2"} {
			step := steps[node]
			By("stopping etcd-adapter at " + step + " while Machine m-" + node + " is deleted")
			before := memberIDs(ctx, c)
			doomedID := c.workload.Etcd.MemberOnNode(node).ID()
			crashAt(ctx, step, func() { Expect(mgmt.Client.Delete(ctx, c.machines[node])).To(Succeed()) })

			By("starting a new etcd-adapter, which must converge")
			c.expectGone(ctx, c.machines[node])
			c.expectMembers(ctx, len(before)-1)
			Expect(memberIDs(ctx, c)).To(Equal(slices.DeleteFunc(before, func(id uint64) bool { return id == doomedID })),
				"exactly the deleted Machine's member must be gone")
			c.waitForHooks(ctx)
		}
	}, SpecTimeout(6*time.Minute))
})

// crashAt replaces the running etcd-adapter with one that stops itself the first time it reaches
// step, runs trigger, waits for that stop, and starts a fresh etcd-adapter.
func crashAt(ctx context.Context, step string, trigger func()) {
	Expect(adapter.Stop()).To(Succeed())
	reached := make(chan struct{})
	var once sync.Once
	crashing, err := startAdapter(context.Background(), mgmt, func(rctx context.Context, s string) {
		if s != step {
			return
		}
		once.Do(func() { close(reached) })
		<-rctx.Done() // the manager stops under this reconcile, as a crash would end it here
	})
	Expect(err).NotTo(HaveOccurred())
	trigger()
	Eventually(reached, deletionTimeout).Should(BeClosed(), "etcd-adapter must reach step %s", step)
	Expect(crashing.Stop()).To(Succeed())
	adapter, err = startAdapter(context.Background(), mgmt, nil)
	Expect(err).NotTo(HaveOccurred())
}

// memberIDs lists the etcd member IDs of the cluster, sorted, from etcd itself.
func memberIDs(ctx context.Context, c *testCluster) []uint64 {
	return memberIDsWith(ctx, Default, c)
}

// memberIDsWith is memberIDs asserting with g: inside Eventually, pass its Gomega while a running
// voter is being removed. Note: the client may pick that member's endpoint in the moment between
// etcd stopping its gRPC server and the member counting as stopped; the server then answers
// "200 (OK); malformed header: missing HTTP content-type", which the client does not retry
// elsewhere, and the next poll asks the members left.
func memberIDsWith(ctx context.Context, g Gomega, c *testCluster) []uint64 {
	members, err := c.workload.Etcd.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var ids []uint64
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return ids
}
