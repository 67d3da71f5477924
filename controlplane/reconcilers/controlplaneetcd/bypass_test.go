package controlplaneetcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// TestReconciler_bypassEvents: a person's annotation that releases a deleting Machine's hook
// without a member removal is recorded, by the manager's real recorder on the real apiserver, as
// a Warning Event on the Machine and on the ControlPlaneEtcd naming the annotation and the field
// manager that set it (from the apiserver's managedFields).
func TestReconciler_bypassEvents(t *testing.T) {
	tests := []struct {
		name       string
		members    int
		annotation string
		deleting   string
	}{
		{name: "release-hook=true on a deleting Machine whose member is healthy", members: 3,
			annotation: v1alpha1.ReleaseHookAnnotation, deleting: "cp-1"},
		{name: "skip-quorum-guard=true on the last member's deleting Machine", members: 1,
			annotation: v1alpha1.SkipQuorumGuardAnnotation, deleting: "cp-0"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			e := newReconcileEnv(t, g, "bypass", false)
			e.r.Recorder = e.mgmt.events
			cpe := e.createCPE(g, "bypass", v1alpha1.ModeManage)
			var doomed *clusterv1.Machine
			for n := range tt.members {
				node := fmt.Sprintf("cp-%d", n)
				m := e.createMachine(g, node, node == tt.deleting)
				if node == tt.deleting {
					doomed = m
				}
			}
			before := doomed.DeepCopy()
			doomed.Annotations[tt.annotation] = v1alpha1.AnnotationTrue
			const manager = "break-glass-kubectl"
			g.Expect(e.mgmt.direct.Patch(context.Background(), doomed, client.MergeFrom(before), client.FieldOwner(manager))).To(Succeed())
			e.cached(g, doomed)
			e.backends.cluster.ObserveResponse = healthySnapshot(tt.members)
			e.firstPass(g, cpe)

			e.reconcile(g, cpe)

			e.stored(g, doomed)
			g.Expect(doomed.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation))
			g.Expect(e.backends.cluster.RemovedMembers).To(BeEmpty())
			named := And(ContainSubstring(tt.annotation), ContainSubstring(`field manager "`+manager+`"`))
			warning := func(kind, name string) OmegaMatcher {
				return And(HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", v1alpha1.EventHookReleasedByAnnotation),
					HaveField("InvolvedObject.Kind", kind), HaveField("InvolvedObject.Name", name), HaveField("Message", named))
			}
			g.Eventually(func() []corev1.Event {
				events := &corev1.EventList{}
				g.Expect(e.mgmt.direct.List(context.Background(), events, client.InNamespace(e.ns))).To(Succeed())
				return events.Items
			}, time.Minute, 100*time.Millisecond).Should(And(ContainElement(warning("Machine", doomed.Name)),
				ContainElement(warning(v1alpha1.ControlPlaneEtcdKind, cpe.Name))), "case %d", i)
		})
	}
}

// TestReconciler_hookRemovedByHand: the hook taken off a deleting Machine by someone other than
// etcd-adapter while its member's removal is under way is recorded, by the manager's real
// recorder on the real apiserver, as a Warning Event on the Machine and on the ControlPlaneEtcd
// saying that who is not known; etcd-adapter's own release after the member is gone records
// none.
func TestReconciler_hookRemovedByHand(t *testing.T) {
	tests := []struct {
		name string
		// byHand takes the hook off by hand; otherwise the member goes and etcd-adapter releases it.
		byHand bool
	}{
		{name: "the hook taken off by hand during the removal", byHand: true},
		{name: "etcd-adapter releases the hook once the member is gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			e := newReconcileEnv(t, g, "byhand", false)
			e.r.Recorder = e.mgmt.events
			cpe := e.createCPE(g, "byhand", v1alpha1.ModeManage)
			e.createMachine(g, "cp-0", false)
			doomed := e.createMachine(g, "cp-1", true)
			e.createMachine(g, "cp-2", false)
			e.backends.cluster.ObserveResponse = healthySnapshot(3)
			e.backends.cluster.RemoveMemberResponses = map[uint64]etcd.Removal{2: {State: etcd.RemovalInProgress, Reason: "waiting"}}
			e.firstPass(g, cpe)

			stored := &v1alpha1.ControlPlaneEtcd{}
			g.Eventually(func() *v1alpha1.MemberRemovalStatus {
				e.reconcile(g, cpe)
				e.woken(g, cpe)
				g.Expect(e.mgmt.direct.Get(ctx, client.ObjectKeyFromObject(cpe), stored)).To(Succeed())
				return stored.Status.Removal
			}, time.Minute, 10*time.Millisecond).Should(HaveValue(And(HaveField("MachineName", doomed.Name), HaveField("Result", v1alpha1.RemovalInProgress))))

			if tt.byHand {
				e.stored(g, doomed)
				before := doomed.DeepCopy()
				delete(doomed.Annotations, v1alpha1.PreTerminateHookAnnotation)
				g.Expect(e.mgmt.direct.Patch(ctx, doomed, client.MergeFrom(before), client.FieldOwner("break-glass-kubectl"))).To(Succeed())
				e.cached(g, doomed)
			} else {
				// etcd removed the member: it is gone from the member list and reports Removed.
				e.backends.cluster.ObserveResponse, e.backends.cluster.RemoveMemberResponses = healthySnapshot(3, 1), nil
			}
			g.Eventually(func() *v1alpha1.MemberRemovalStatus {
				e.reconcile(g, cpe)
				e.woken(g, cpe)
				g.Expect(e.mgmt.direct.Get(ctx, client.ObjectKeyFromObject(cpe), stored)).To(Succeed())
				return stored.Status.Removal
			}, time.Minute, 10*time.Millisecond).Should(HaveValue(HaveField("EndTime", Not(BeNil()))))

			event := func(reason, kind, name string) OmegaMatcher {
				return And(HaveField("Reason", reason), HaveField("InvolvedObject.Kind", kind), HaveField("InvolvedObject.Name", name))
			}
			events := func() []corev1.Event {
				list := &corev1.EventList{}
				g.Expect(e.mgmt.direct.List(ctx, list, client.InNamespace(e.ns))).To(Succeed())
				return list.Items
			}
			if !tt.byHand {
				// The release's own Event is recorded after the record closed: wait for it, then
				// no Warning of a hand removal may be there.
				g.Eventually(events, time.Minute, 100*time.Millisecond).Should(ContainElement(event(v1alpha1.EventHookReleased, v1alpha1.ControlPlaneEtcdKind, cpe.Name)))
				g.Expect(events()).NotTo(ContainElement(HaveField("Reason", v1alpha1.EventHookRemovedByHand)))
				return
			}
			warning := func(kind, name string) OmegaMatcher {
				return And(event(v1alpha1.EventHookRemovedByHand, kind, name), HaveField("Type", corev1.EventTypeWarning),
					HaveField("Message", And(ContainSubstring("not by etcd-adapter"), ContainSubstring("who is not known"), ContainSubstring("member cp-1"))))
			}
			g.Eventually(events, time.Minute, 100*time.Millisecond).Should(And(ContainElement(warning("Machine", doomed.Name)),
				ContainElement(warning(v1alpha1.ControlPlaneEtcdKind, cpe.Name))))
		})
	}
}
