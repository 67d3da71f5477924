package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/controlplaneetcd"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

var _ = Describe("Crash safety of the kubeadm removal flow", func() {
	It("converges after the controller stops at each step boundary: only the deleted Machine's member goes, never after its hook", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 5, v1alpha1.ModeManage)
		c.expectMembers(ctx, 5)
		steps := []struct{ node, step string }{
			{"cp-4", controlplaneetcd.StepQuorumChecked},
			{"cp-3", controlplaneetcd.StepRemovalRequested},
			{"cp-2", controlplaneetcd.StepRemovedBeforeRelease},
			{"cp-1", controlplaneetcd.StepHookReleased},
		}
		for _, s := range steps {
			By("stopping etcd-adapter at " + s.step + " while Machine m-" + s.node + " is deleted")
			doomed := c.machines[s.node]
			w := watchRemoval(ctx, c, doomed)
			crashAt(ctx, s.step, func() { Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed()) })

			By("starting a new etcd-adapter, which must converge")
			c.expectGone(ctx, doomed)
			// The Machine is gone and its kubelet with it (see the kubeadm scale-down spec).
			Expect(c.workload.Kubelet(s.node).Stop()).To(Succeed())
			w.expectSafe(ctx, c)
		}
	}, SpecTimeout(8*time.Minute))

	It("converges after the controller stops right after moving leadership off the member it removes", func(ctx SpecContext) {
		// A 5 s election timeout keeps the leader the spec chose the leader until etcd-adapter
		// moves leadership off it (see "A kubeadm leader whose Node object was deleted").
		c := startKubeadmClusterWith(ctx, workload.KubeadmOptions{Members: 3, ElectionMs: 5000}, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		node := leaderNode(c)
		doomed := c.machines[node]
		doomedID := c.workload.Etcd.MemberOnNode(node).ID()

		By("deleting the leader's Machine m-" + node + " and stopping etcd-adapter once leadership moved")
		w := watchRemoval(ctx, c, doomed)
		var leaderAtStop uint64
		var membersAtStop []uint64
		crashAtChecking(ctx, controlplaneetcd.StepLeaderMoved, func() { Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed()) }, func() {
			leaderAtStop = leaderID(c)
			membersAtStop = memberIDs(ctx, c)
		})
		Expect(leaderAtStop).NotTo(Equal(doomedID), "leadership must have moved off the member before the stop")
		Expect(membersAtStop).To(ContainElement(doomedID), "the removal must not have been asked in the pass that moved leadership")

		By("starting a new etcd-adapter, which must remove the member and release")
		c.expectGone(ctx, doomed)
		Expect(c.workload.Kubelet(node).Stop()).To(Succeed())
		w.expectSafe(ctx, c)
	}, SpecTimeout(4*time.Minute))
})

var _ = Describe("The removal flow under failed writes and replaced objects", func() {
	It("converges without a lost record when the ControlPlaneEtcd status patches fail after the removal was asked", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		doomed := c.machines["cp-2"]

		By("failing the next status patches of the ControlPlaneEtcd once the backend was asked to remove the member")
		const failures = 3
		var armed, failed atomic.Int32
		var arm sync.Once
		Expect(adapter.Stop()).To(Succeed())
		var err error
		adapter, err = startAdapterWith(context.Background(), mgmt, adapterOptions{
			atStep: func(_ context.Context, step string) {
				if step == controlplaneetcd.StepRemovalRequested {
					arm.Do(func() { armed.Store(failures) })
				}
			},
			wrapClient: func(cl client.WithWatch) client.Client {
				return interceptor.NewClient(cl, interceptor.Funcs{
					SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
						// Only this spec's ControlPlaneEtcd: those of earlier specs are still reconciled.
						if _, ok := obj.(*v1alpha1.ControlPlaneEtcd); ok && sub == "status" && obj.GetNamespace() == c.cpe.Namespace && armed.Add(-1) >= 0 {
							failed.Add(1)
							return apierrors.NewServiceUnavailable("injected: the status patch failed")
						}
						return cl.SubResource(sub).Patch(ctx, obj, p, opts...)
					},
				})
			},
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(restartPlainAdapter)

		w := watchRemoval(ctx, c, doomed)
		Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed())
		c.expectGone(ctx, doomed)
		Expect(c.workload.Kubelet("cp-2").Stop()).To(Succeed())
		Expect(failed.Load()).To(BeEquivalentTo(failures), "the injected status patch failures must have happened")
		w.expectSafe(ctx, c)
	}, SpecTimeout(4*time.Minute))

	It("finishes the removal through a ControlPlaneEtcd deleted and re-created after the removal was asked, without a second removal", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		doomed := c.machines["cp-2"]

		By("holding etcd-adapter right after it asked for the removal, while the ControlPlaneEtcd is deleted and created again")
		reached, resume := make(chan struct{}), make(chan struct{})
		var once sync.Once
		Expect(adapter.Stop()).To(Succeed())
		var err error
		adapter, err = startAdapter(context.Background(), mgmt, func(rctx context.Context, step string) {
			if step != controlplaneetcd.StepRemovalRequested {
				return
			}
			once.Do(func() {
				close(reached)
				select {
				case <-resume:
				case <-rctx.Done():
				}
			})
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(restartPlainAdapter)

		w := watchRemoval(ctx, c, doomed)
		Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed())
		Eventually(reached, deletionTimeout).Should(BeClosed(), "etcd-adapter must ask for the removal")
		old := c.status(ctx)
		Expect(mgmt.Client.Delete(ctx, old)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(old), &v1alpha1.ControlPlaneEtcd{}))
		}, reconcileTimeout).Should(BeTrue())
		recreated := &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: old.Namespace, Name: old.Name}, Spec: old.Spec}
		Expect(mgmt.Client.Create(ctx, recreated)).To(Succeed())
		close(resume)

		By("the re-created ControlPlaneEtcd's flow confirms the removal and releases")
		c.expectGone(ctx, doomed)
		Expect(c.workload.Kubelet("cp-2").Stop()).To(Succeed())
		Expect(c.status(ctx).UID).To(Equal(recreated.UID))
		w.expectSafe(ctx, c)
	}, SpecTimeout(4*time.Minute))
})

var _ = Describe("Two etcd-adapter replicas under leader election", func() {
	It("hands a removal over: the leader stops after asking for it, the other replica takes the Lease and finishes", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		doomed := c.machines["cp-2"]
		ensureNamespace(ctx, adapterNamespace)
		lease := "etcd-adapter-e2e-" + c.cluster.Namespace

		By("starting replica A, which takes the Lease, then replica B")
		Expect(adapter.Stop()).To(Succeed())
		DeferCleanup(restartPlainAdapter) // registered first, so it runs once the replicas stopped
		reached := make(chan struct{})
		var once sync.Once
		replicaA, err := startAdapterWith(context.Background(), mgmt, adapterOptions{leaderElectionID: lease, atStep: func(rctx context.Context, step string) {
			if step != controlplaneetcd.StepRemovalRequested {
				return
			}
			once.Do(func() { close(reached) })
			<-rctx.Done() // replica A stops under this reconcile, as a crash would end it here
		}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(replicaA.Stop()).To(Succeed()) })
		holderA := eventuallyLeaseHolder(ctx, lease, "")
		replicaB, err := startAdapterWith(context.Background(), mgmt, adapterOptions{leaderElectionID: lease, noWebhooks: true})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(replicaB.Stop()).To(Succeed()) })

		By("deleting Machine m-cp-2: replica A asks for the removal and stops without giving up the Lease")
		w := watchRemoval(ctx, c, doomed)
		Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed())
		Eventually(reached, deletionTimeout).Should(BeClosed(), "replica A, the leader, must ask for the removal")
		Expect(replicaA.Stop()).To(Succeed())
		// The webhooks of the Deployment's other Pods keep answering; here they take replica A's
		// port.
		webhooks, err := startWebhooksOnly(context.Background(), mgmt)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(webhooks.Stop()).To(Succeed()) })

		By("replica B takes the Lease once it expires and finishes the removal")
		eventuallyLeaseHolder(ctx, lease, holderA)
		c.expectGone(ctx, doomed)
		Expect(c.workload.Kubelet("cp-2").Stop()).To(Succeed())
		w.expectSafe(ctx, c)
	}, SpecTimeout(4*time.Minute))
})

// restartPlainAdapter replaces the test's etcd-adapter with an ordinary one.
func restartPlainAdapter() {
	Expect(adapter.Stop()).To(Succeed())
	var err error
	adapter, err = startAdapter(context.Background(), mgmt, nil)
	Expect(err).NotTo(HaveOccurred())
}

// removalWatch checks, all along one Machine's deletion, the invariants of a removal: the members
// of other Machines stay, and the hook is never released while etcd still lists the Machine's
// member.
type removalWatch struct {
	machine  *clusterv1.Machine
	doomedID uint64
	others   []uint64
	done     chan string
}

// watchRemoval starts watching the removal of the member of m, before m is deleted.
func watchRemoval(ctx context.Context, c *testCluster, m *clusterv1.Machine) *removalWatch {
	w := &removalWatch{machine: m, doomedID: c.workload.Etcd.MemberOnNode(m.Status.NodeRef.Name).ID(), done: make(chan string, 1)}
	w.others = slices.DeleteFunc(memberIDs(ctx, c), func(id uint64) bool { return id == w.doomedID })
	cli, err := c.workload.Etcd.NewClient(ctx)
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer GinkgoRecover()
		defer func() { _ = cli.Close() }()
		for ctx.Err() == nil {
			got := &clusterv1.Machine{}
			err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)
			released := apierrors.IsNotFound(err) || (err == nil && got.Annotations[v1alpha1.PreTerminateHookAnnotation] == "")
			// The member list is read after the Machine: a member listed now was listed when
			// the hook was already gone.
			resp, lerr := cli.MemberList(ctx)
			if lerr == nil {
				var ids []uint64
				for _, mb := range resp.Members {
					ids = append(ids, mb.ID)
				}
				for _, id := range w.others {
					if !slices.Contains(ids, id) {
						w.done <- fmt.Sprintf("member %x of another Machine was removed (members %x)", id, ids)
						return
					}
				}
				if released && slices.Contains(ids, w.doomedID) {
					w.done <- fmt.Sprintf("the hook of Machine %s was released while etcd still listed its member %x", m.Name, w.doomedID)
					return
				}
				if released {
					w.done <- ""
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

// expectSafe checks, once the Machine is gone, that the invariants held and that the removal
// ended as it should: exactly the Machine's member gone, quorum kept, the record closed as
// Removed, one removal asked.
func (w *removalWatch) expectSafe(ctx context.Context, c *testCluster) {
	var violation string
	Eventually(w.done, reconcileTimeout).Should(Receive(&violation))
	Expect(violation).To(BeEmpty())
	Expect(memberIDs(ctx, c)).To(Equal(w.others), "exactly the deleted Machine's member must be gone")
	c.expectMembers(ctx, len(w.others))
	c.expectRemoved(ctx, w.machine)
	Expect(c.status(ctx).Status.Removal.MemberID).To(Equal(fmt.Sprintf("%x", w.doomedID)),
		"status.removal must still be the record of the removal that was asked, not one made up after it was lost")
	// Note: the recorder writes Events asynchronously, so a second MemberRemoved recorded before
	// the hook went can be written after the Machine is gone; the count is watched for a while.
	// (HookReleased, the flow's last Event, cannot serve as the mark: a manager stopped right
	// after releasing the hook never records it.)
	Consistently(func(g Gomega) {
		removed := slices.DeleteFunc(eventsAbout(ctx, w.machine), func(e corev1.Event) bool { return e.Reason != v1alpha1.EventMemberRemoved })
		var count int32
		for _, e := range removed {
			count += max(e.Count, 1)
		}
		g.Expect(count).To(BeNumerically("<=", 1), "the member must be removed once: %v", removed)
	}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
	c.waitForHooks(ctx)
}

// leaderID returns the ID of etcd's leader, as the members' raft state says, once an election
// under way has ended.
func leaderID(c *testCluster) uint64 {
	var leader *etcdcluster.Member
	Eventually(func() (err error) {
		leader, err = c.workload.Etcd.Leader()
		return err
	}, reconcileTimeout).Should(Succeed())
	return leader.ID()
}

// leaderNode returns the Node of etcd's leader.
func leaderNode(c *testCluster) string {
	id := leaderID(c)
	for _, node := range c.workload.Nodes {
		if m := c.workload.Etcd.MemberOnNode(node); m != nil && m.ID() == id {
			return node
		}
	}
	Fail(fmt.Sprintf("no Node hosts the leader %x", id))
	return ""
}

func ensureNamespace(ctx context.Context, name string) {
	err := mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
}

// eventuallyLeaseHolder waits until the Lease has a holder other than not, and returns it.
func eventuallyLeaseHolder(ctx context.Context, name, not string) string {
	var holder string
	Eventually(func(g Gomega) {
		l := &coordinationv1.Lease{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: adapterNamespace, Name: name}, l)).To(Succeed())
		g.Expect(l.Spec.HolderIdentity).NotTo(BeNil())
		holder = *l.Spec.HolderIdentity
		g.Expect(holder).NotTo(BeEmpty())
		g.Expect(holder).NotTo(Equal(not))
	}, reconcileTimeout).Should(Succeed())
	return holder
}

var _ = Describe("Crash safety of the K3s removal flow", func() {
	It("keeps the hook when K3s claims a removal it did not make while etcd-adapter restarts", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		before := memberIDs(ctx, c)
		doomed := c.machines["cp-2"]
		member := c.workload.Etcd.MemberOnNode("cp-2")

		By("changing Node cp-2's address after its member joined: K3s then finds no member to remove and claims it removed one")
		Expect(c.workload.Simulator.ChangeAddress(ctx, "cp-2", "127.0.0.99")).To(Succeed())

		By("stopping etcd-adapter right after it asked K3s, until K3s wrote its claim")
		crashAtChecking(ctx, controlplaneetcd.StepRemovalRequested, func() { Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed()) }, func() {
			Eventually(func(g Gomega) {
				n := &corev1.Node{}
				g.Expect(c.workload.APIServer.Client.Get(ctx, client.ObjectKey{Name: "cp-2"}, n)).To(Succeed())
				g.Expect(n.Annotations).To(HaveKeyWithValue(k3sRemovedNodeName, member.Name()))
			}, reconcileTimeout).Should(Succeed(), "K3s must claim the removal of member %s", member.Name())
			Expect(memberIDs(ctx, c)).To(ContainElement(member.ID()), "the claim is false: the member is still there")
		})

		By("the new etcd-adapter must not take the claim for proof while etcd lists the member")
		Eventually(func(g Gomega) {
			rec := c.status(ctx).Status.Removal
			g.Expect(rec).NotTo(BeNil())
			g.Expect(rec.MachineName).To(Equal(doomed.Name))
			g.Expect(rec.Result).To(Equal(v1alpha1.RemovalRejected))
		}, deletionTimeout).Should(Succeed(), "the removal must stop as Rejected")
		Consistently(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(doomed), got)).To(Succeed(), "Machine %s must not be let go", doomed.Name)
			g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue))
		}, 5*time.Second, time.Second).Should(Succeed(), "the hook must stay while etcd still lists the member")
		Expect(memberIDs(ctx, c)).To(Equal(before), "no member is removed")

		By("a person releases the hook: the Machine goes, no member is removed")
		patchAnnotation(ctx, doomed, v1alpha1.ReleaseHookAnnotation, v1alpha1.ReleaseHookValue)
		c.expectGone(ctx, doomed)
		Expect(memberIDs(ctx, c)).To(Equal(before))
	}, SpecTimeout(4*time.Minute))
})

// k3sRemovedNodeName is where K3s claims it removed a Node's member (k3s pkg/etcd/etcd.go).
const k3sRemovedNodeName = "etcd.k3s.cattle.io/removed-node-name"
