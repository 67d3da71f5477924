package controlplaneetcd

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// fragmentedSnapshot is healthySnapshot(3) where every member reports a 10 MiB database and
// cp-1 (member 2, a follower) holds 80 MiB, 70 of them free.
func fragmentedSnapshot() *etcd.Snapshot {
	s := healthySnapshot(3)
	for i := range s.Evidence {
		s.Evidence[i].Status = &etcd.MemberStatus{DBSize: 10 << 20, DBSizeInUse: 9 << 20}
		if s.Evidence[i].MemberID == 2 {
			s.Evidence[i].Status = &etcd.MemberStatus{DBSize: 80 << 20, DBSizeInUse: 10 << 20}
		}
	}
	return s
}

// TestReconcileMaintenance runs passes against a real apiserver with a scripted etcd: a pass
// defragments the member the decision names only when the observation made right before the call
// decides the same, and records what it did in status and Events.
func TestReconcileMaintenance(t *testing.T) {
	t.Run("A pass does not defragment when etcd changed right before the call", func(t *testing.T) {
		g := NewWithT(t)
		e := newReconcileEnv(t, g, "maint-changed", false)
		cpe := e.createMaintainedCPE(g, "maint-changed")
		e.firstPass(g, cpe)
		atCall := fragmentedSnapshot()
		// cp-2 stopped answering after the pass's observation: with cp-1 blocked, quorum would
		// rest on cp-0 alone.
		atCall.Evidence[2] = etcd.MemberEvidence{MemberID: 3, NodeName: "cp-2", ObservedAt: atCall.ObservedAt, Contact: etcd.ContactUnreachable, Error: "connection refused"}
		e.backends.cluster.ObserveResponse, e.backends.cluster.AtCall = fragmentedSnapshot(), atCall

		g.Expect(e.reconcile(g, cpe).RequeueAfter).To(Equal(maintenanceStepInterval))
		g.Expect(e.backends.cluster.Defragmented).To(BeEmpty())
		e.stored(g, cpe)
		g.Expect(cpe.Status.Maintenance).To(BeNil())
		g.Expect(e.recorder.events).NotTo(ContainElement(matchEvent(corev1.EventTypeNormal, v1alpha1.EventMemberDefragmented, v1alpha1.ControlPlaneEtcdKind, cpe.Name)))
	})
	t.Run("A pass defragments the fragmented follower and records its sizes before and after", func(t *testing.T) {
		g := NewWithT(t)
		e := newReconcileEnv(t, g, "maint-done", false)
		cpe := e.createMaintainedCPE(g, "maint-done")
		e.firstPass(g, cpe)
		e.backends.cluster.ObserveResponse = fragmentedSnapshot()
		e.backends.cluster.DefragmentResponse = etcd.Defragmentation{Before: etcd.MemberStatus{DBSize: 80 << 20, DBSizeInUse: 10 << 20},
			After: &etcd.MemberStatus{DBSize: 10 << 20, DBSizeInUse: 10 << 20}, Start: e.r.now(), Took: 1}

		g.Expect(e.reconcile(g, cpe).RequeueAfter).To(Equal(maintenanceStepInterval))
		g.Expect(e.backends.cluster.Defragmented).To(ConsistOf(HaveField("ID", uint64(2))))
		e.stored(g, cpe)
		g.Expect(cpe.Status.Maintenance).NotTo(BeNil())
		g.Expect(cpe.Status.Maintenance.Defragmentations).To(ConsistOf(And(
			HaveField("Member", "cp-1"), HaveField("MemberID", "2"), HaveField("Reason", v1alpha1.DefragmentationReasonFreeSpace),
			HaveField("DBSizeBefore", int64(80<<20)), HaveField("DBSizeAfter", ptr.To(int64(10<<20))))))
		g.Expect(e.recorder.events).To(ContainElement(And(matchEvent(corev1.EventTypeNormal, v1alpha1.EventMemberDefragmented, v1alpha1.ControlPlaneEtcdKind, cpe.Name),
			HaveField("Message", ContainSubstring("database 80.0 MiB (10.0 MiB in use) before, 10.0 MiB (10.0 MiB in use) after")))))
	})
}

func (e *reconcileEnv) createMaintainedCPE(g Gomega, name string) *v1alpha1.ControlPlaneEtcd {
	cpe := e.createCPE(g, name, v1alpha1.ModeObserve)
	cpe.Spec.Maintenance = &v1alpha1.MaintenanceSpec{Defragmentation: &v1alpha1.DefragmentationSpec{FreeBytesThreshold: ptr.To(resource.MustParse("50Mi"))}}
	g.Expect(e.mgmt.direct.Update(context.Background(), cpe)).To(Succeed())
	e.cached(g, cpe)
	return cpe
}
