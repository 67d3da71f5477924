package controlplaneetcd

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	etcdfake "github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
)

// observedBackend is a backend that can change through an observation (etcd.ObservedChanger),
// recording the snapshot each change was decided on.
type observedBackend struct {
	*etcdfake.Cluster
	removedOn, movedOn []*etcd.Snapshot
}

func (b *observedBackend) RemoveMemberObserved(ctx context.Context, snap *etcd.Snapshot, m etcd.Member) (etcd.Removal, error) {
	b.removedOn = append(b.removedOn, snap)
	return b.RemoveMember(ctx, m)
}

func (b *observedBackend) MoveLeaderObserved(ctx context.Context, snap *etcd.Snapshot, from, to etcd.Member) (etcd.LeaderMove, error) {
	b.movedOn = append(b.movedOn, snap)
	return b.MoveLeader(ctx, from, to)
}

// TestReconciler_changesOnThePassObservation: a backend that can change through an observation
// is handed the pass's own, the one the quorum projection ran on, for the leadership move, the
// removal and its confirmation, instead of observing every member again.
func TestReconciler_changesOnThePassObservation(t *testing.T) {
	tests := []struct {
		name    string
		machine int
		prepare func(s *scope)
		check   func(g Gomega, s *scope, b *observedBackend)
	}{
		{name: "leadership moved off the leader", machine: 0, check: func(g Gomega, s *scope, b *observedBackend) {
			g.Expect(b.movedOn).To(HaveLen(1))
			g.Expect(b.movedOn[0]).To(BeIdenticalTo(s.snapshot))
			g.Expect(b.removedOn).To(BeEmpty())
		}},
		{name: "a member removed", machine: 1, check: func(g Gomega, s *scope, b *observedBackend) {
			g.Expect(b.removedOn).To(HaveLen(1))
			g.Expect(b.removedOn[0]).To(BeIdenticalTo(s.snapshot))
		}},
		{name: "a removal in flight confirmed", machine: 1,
			prepare: func(s *scope) {
				s.cpe.Status.Removal = inProgress("cp-1", "2", "m-cp-1")
				dropMember(s, 2)
			},
			check: func(g Gomega, s *scope, b *observedBackend) {
				g.Expect(b.removedOn).To(HaveLen(1))
				g.Expect(b.removedOn[0]).To(BeIdenticalTo(s.snapshot))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := testScope(3)
			s.cpe.Name, s.cpe.Namespace = "c", "ns"
			b := &observedBackend{Cluster: &etcdfake.Cluster{MoveLeaderResponse: etcd.LeaderMove{Outcome: etcd.LeaderMoved}}}
			s.backend = b
			m := deleting(s.machines[tt.machine])
			if tt.prepare != nil {
				tt.prepare(s)
			}
			s.storedRemoval = s.cpe.Status.Removal.DeepCopy()
			r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(eventScheme()).WithIndex(&v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, creation.ClusterNameOf).
				WithObjects(m, s.cpe).WithStatusSubresource(s.cpe).Build(), Recorder: &eventRecorder{}}

			_, err := r.reconcileDeletingMachine(context.Background(), s, m)

			g.Expect(err).NotTo(HaveOccurred())
			tt.check(g, s, b)
		})
	}
}
