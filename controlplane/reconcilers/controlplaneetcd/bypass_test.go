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
