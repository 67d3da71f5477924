package controlplaneetcd

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func Test_removalRecord(t *testing.T) {
	m1 := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m-cp-1"}}
	cp1 := etcd.Member{ID: 2, Name: "cp-1", NodeName: "cp-1"}
	rejoined := etcd.Member{ID: 7, Name: "cp-1", NodeName: "cp-1"}
	etcdIDs := &etcd.Snapshot{}
	synthetic := &etcd.Snapshot{SyntheticMemberIDs: true}
	tests := []struct {
		name         string
		rec          *v1alpha1.MemberRemovalStatus
		snap         *etcd.Snapshot
		isOf         etcd.Member
		wantIsOf     bool
		wantInFlight bool
	}{
		{name: "no record is of no member and in flight for no Machine", snap: etcdIDs, isOf: cp1},
		{name: "etcd's member ID identifies the member", rec: inProgress("cp-1", "2", "m-cp-1"), snap: etcdIDs, isOf: cp1, wantIsOf: true, wantInFlight: true},
		{name: "a member that rejoined under another ID is another member", rec: inProgress("cp-1", "2", "m-cp-1"), snap: etcdIDs, isOf: rejoined, wantInFlight: true},
		{name: "with synthetic IDs, name and Node identify the member, whatever its ID", rec: inProgress("cp-1", "", "m-cp-1"), snap: synthetic, isOf: rejoined, wantIsOf: true, wantInFlight: true},
		{name: "a record without an ID names no member when the IDs are etcd's", rec: inProgress("cp-1", "", "m-cp-1"), snap: etcdIDs, isOf: cp1},
		{name: "without an observation a name and Node are enough to be in flight", rec: inProgress("cp-1", "", "m-cp-1"), isOf: cp1, wantInFlight: true},
		{name: "another Machine's record is not in flight for this one", rec: inProgress("cp-1", "2", "m-cp-9"), snap: etcdIDs, isOf: cp1, wantIsOf: true},
		{name: "an ended record is not in flight", rec: func() *v1alpha1.MemberRemovalStatus {
			rec := inProgress("cp-1", "2", "m-cp-1")
			rec.Result, rec.EndTime = v1alpha1.RemovalRemoved, &metav1.Time{Time: now}
			return rec
		}(), snap: etcdIDs, isOf: cp1, wantIsOf: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := removalRecord{status: tt.rec, snapshot: tt.snap}
			if tt.snap != nil {
				g.Expect(r.isOf(tt.isOf)).To(Equal(tt.wantIsOf))
			}
			g.Expect(r.inFlightFor(m1) != nil).To(Equal(tt.wantInFlight))
		})
	}
}

func Test_scope_openAndCloseRemoval(t *testing.T) {
	g := NewWithT(t)
	s := testScope(3)
	m := s.machines[1]
	target := s.snapshot.Members[1]

	s.openRemoval(m, target, "removal requested")
	opened := *s.cpe.Status.Removal
	g.Expect(opened).To(And(HaveField("MachineName", "m-cp-1"), HaveField("Member", "cp-1"), HaveField("MemberID", "2"), HaveField("NodeName", "cp-1"),
		HaveField("Result", v1alpha1.RemovalInProgress), HaveField("StartTime.Time", now), HaveField("EndTime", BeNil())))

	s.now = now.Add(time.Minute)
	s.openRemoval(m, target, "member removed; confirming")
	g.Expect(s.cpe.Status.Removal).To(HaveValue(And(HaveField("Message", "member removed; confirming"), HaveField("StartTime.Time", now))),
		"the same member's removal keeps its start, so its timeout counts from the first request")

	s.closeRemoval(*s.cpe.Status.Removal, v1alpha1.RemovalRemoved, "gone")
	g.Expect(s.cpe.Status.Removal).To(HaveValue(And(HaveField("Result", v1alpha1.RemovalRemoved), HaveField("Message", "gone"),
		HaveField("EndTime", HaveValue(HaveField("Time", now.Add(time.Minute)))))))
	g.Expect(s.removal().inFlight()).To(BeFalse())

	s.clearRemoval()
	g.Expect(s.cpe.Status.Removal).To(BeNil())
}
