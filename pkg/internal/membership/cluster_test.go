package membership

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// TestCluster_observedChanges: a change decided on the snapshot of the latest Observe goes
// through that observation, with no round of calls before it; any other snapshot (none, an
// older Observe's, another caller's newer one) is not trusted and the cluster is asked again.
func TestCluster_observedChanges(t *testing.T) {
	three := []etcd.Member{{ID: 1}, {ID: 2}, {ID: 3}}
	tests := []struct {
		name string
		// snap picks the snapshot the change is decided on, from the two Observes made.
		snap      func(first, second *etcd.Snapshot) *etcd.Snapshot
		wantAsked int
	}{
		{name: "the latest Observe's snapshot: no observation before the change", snap: func(_, second *etcd.Snapshot) *etcd.Snapshot { return second }, wantAsked: 2},
		{name: "an older Observe's snapshot: observed again", snap: func(first, _ *etcd.Snapshot) *etcd.Snapshot { return first }, wantAsked: 3},
		{name: "no snapshot: observed again", snap: func(_, _ *etcd.Snapshot) *etcd.Snapshot { return nil }, wantAsked: 3},
		{name: "a copy of the latest snapshot, not the backend's own: observed again", snap: func(_, second *etcd.Snapshot) *etcd.Snapshot {
			c := *second
			return &c
		}, wantAsked: 3},
	}
	for _, tt := range tests {
		for _, change := range []string{"RemoveMemberObserved", "MoveLeaderObserved"} {
			t.Run(change+": "+tt.name, func(t *testing.T) {
				g := NewWithT(t)
				tr := &fakeTransport{members: map[string]*fakeMember{
					"a": {memberID: 1, cluster: 7, own: []uint64{1, 2, 3}, committed: []uint64{1, 2}},
					"b": {memberID: 2, cluster: 7, own: []uint64{1, 2, 3}, committed: []uint64{1, 2}},
					"c": {memberID: 3, cluster: 7, own: []uint64{1, 2, 3}, committed: []uint64{1, 2}},
				}}
				asked := 0
				c := &Cluster{CallTimeout: time.Minute, Logger: func(context.Context) logr.Logger { return logr.Discard() }}
				c.Observer = func(context.Context) (*Observation, error) {
					asked++
					return observed(g, tr, answered("a", 1, 7, 1, three), answered("b", 2, 7, 1, three), answered("c", 3, 7, 1, three)), nil
				}
				ctx := context.Background()
				first, err := c.Observe(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				second, err := c.Observe(ctx)
				g.Expect(err).NotTo(HaveOccurred())

				switch change {
				case "RemoveMemberObserved":
					got, err := c.RemoveMemberObserved(ctx, tt.snap(first, second), etcd.Member{ID: 3})
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(got.State).To(Equal(etcd.RemovalRemoved), got.Reason)
					g.Expect(tr.members["a"].removed).To(Equal([]uint64{3}), "through the leader")
				default:
					got, err := c.MoveLeaderObserved(ctx, tt.snap(first, second), etcd.Member{ID: 1}, etcd.Member{ID: 2})
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(got.Outcome).To(Equal(etcd.LeaderMoved))
				}
				g.Expect(asked).To(Equal(tt.wantAsked), "observations made")
			})
		}
	}
}
