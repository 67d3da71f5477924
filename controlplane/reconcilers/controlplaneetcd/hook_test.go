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

func Test_releaseWithoutRemoval(t *testing.T) {
	deleting := metav1.Now()
	tests := []struct {
		name    string
		setup   func(s *scope, m *clusterv1.Machine)
		wantWhy string
	}{
		{"A Machine on a Node with a member is not released", func(*scope, *clusterv1.Machine) {}, ""},
		{"The release annotation releases", func(_ *scope, m *clusterv1.Machine) {
			m.Annotations = map[string]string{v1alpha1.ReleaseHookAnnotation: v1alpha1.ReleaseHookValue}
		}, "released by annotation"},
		{"A deleting Cluster releases", func(s *scope, _ *clusterv1.Machine) { s.cluster.DeletionTimestamp = &deleting }, "Cluster is being deleted"},
		{"A deleting control plane releases", func(s *scope, _ *clusterv1.Machine) { s.controlPlaneDeleting = true }, "control plane is being deleted"},
		{"The release annotation releases only with the explicit value", func(_ *scope, m *clusterv1.Machine) {
			m.Annotations = map[string]string{v1alpha1.ReleaseHookAnnotation: "false"}
		}, ""},
		{"An empty release annotation releases nothing", func(_ *scope, m *clusterv1.Machine) {
			m.Annotations = map[string]string{v1alpha1.ReleaseHookAnnotation: ""}
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := testScope(3)
			m := s.machines[0]
			tt.setup(s, m)
			why := releaseWithoutRemoval(s, m)
			if tt.wantWhy == "" {
				g.Expect(why).To(BeEmpty())
				return
			}
			g.Expect(why).To(ContainSubstring(tt.wantWhy))
		})
	}
}

func Test_scope_otherPreTerminateHooks(t *testing.T) {
	legacy := map[string]string{
		v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue,
		v1alpha1.LegacyK3sHookAnnotation:    v1alpha1.LegacyK3sHookValue,
		v1alpha1.KCPHookAnnotation:          "",
		"unrelated":                         "x",
	}
	t.Run("KCP's hook and a legacy hook whose KThreesControlPlane still runs come first", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(1)
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Annotations: legacy}}
		g.Expect(s.otherPreTerminateHooks(m)).To(ConsistOf(v1alpha1.LegacyK3sHookAnnotation, v1alpha1.KCPHookAnnotation))
		g.Expect(s.holdsMachine(m)).To(BeTrue())
	})
	t.Run("The legacy hook is adopted when no KThreesControlPlane is left", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(1)
		s.legacyHookAdoptable = true
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.LegacyK3sHookAnnotation: v1alpha1.LegacyK3sHookValue}}}
		g.Expect(s.holdsMachine(m)).To(BeTrue())
		g.Expect(s.otherPreTerminateHooks(m)).To(BeEmpty())
	})
}

func Test_firstGhost(t *testing.T) {
	deleting := metav1.Now()
	seenLongAgo := func(s *scope) {
		s.cpe.Status.NotStartedMembers = []v1alpha1.NotStartedMemberStatus{
			{ID: "2", FirstSeenTime: metav1.NewTime(now.Add(-v1alpha1.DefaultJoinTimeout))}}
	}
	tests := []struct {
		name      string
		setup     func(s *scope)
		wantGhost uint64 // 0: none
	}{
		{"Every member on a Machine's Node: no ghost", func(*scope) {}, 0},
		{"A member no Node hosts and no Machine is named for is a ghost", func(s *scope) {
			s.snapshot.Members[2].NodeName, s.snapshot.Members[2].Name = "", "cp-9"
		}, 3},
		{"The member of a running Machine whose Node object was deleted is never a ghost", func(s *scope) {
			s.snapshot.Members[2].NodeName = ""
		}, 0},
		{"The K3s-named member of a Machine whose Node object was deleted is never a ghost", func(s *scope) {
			s.snapshot.Members[2].NodeName, s.snapshot.Members[2].Name = "", "cp-2-0a1b2c3d"
		}, 0},
		{"A member that never started on a running Machine's Node is not a ghost while its join may be under way", func(s *scope) {
			s.snapshot.Members[1].Name = ""
		}, 0},
		{"A member that never started on a running Machine's Node is a ghost once spec.joinTimeout passed since it was first seen", func(s *scope) {
			s.snapshot.Members[1].Name = ""
			seenLongAgo(s)
		}, 2},
		{"spec.joinTimeout sets how long a join is waited for", func(s *scope) {
			s.snapshot.Members[1].Name = ""
			s.cpe.Status.NotStartedMembers = []v1alpha1.NotStartedMemberStatus{{ID: "2", FirstSeenTime: metav1.NewTime(now.Add(-time.Minute))}}
			s.cpe.Spec.JoinTimeout = &metav1.Duration{Duration: time.Minute}
		}, 2},
		{"A member that never started on no Node is a ghost at once", func(s *scope) {
			s.snapshot.Members[1].Name, s.snapshot.Members[1].NodeName = "", ""
		}, 2},
		{"A member that never started on a deleting Machine's Node is a ghost at once", func(s *scope) {
			s.snapshot.Members[1].Name = ""
			s.machines[1].DeletionTimestamp = &deleting
		}, 2},
		{"A member that never started on a Node without a Machine is not a ghost while its join may be under way", func(s *scope) {
			s.snapshot.Members[2].Name = ""
			s.machines = s.machines[:2]
		}, 0},
		{"A started member on a Node without a Machine is not removed: its Machine may not exist yet", func(s *scope) {
			s.machines = s.machines[:2]
		}, 0},
		{"With no Machine at all, no member on a live Node is a ghost", func(s *scope) { s.machines = nil }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := testScope(3)
			tt.setup(s)
			ghost, ok := s.firstGhost()
			if tt.wantGhost == 0 {
				g.Expect(ok).To(BeFalse(), "got ghost %v", ghost)
				return
			}
			g.Expect(ok).To(BeTrue())
			g.Expect(ghost.ID).To(Equal(tt.wantGhost))
		})
	}
}

func Test_recordedMember(t *testing.T) {
	tests := []struct {
		name      string
		rec       v1alpha1.MemberRemovalStatus
		synthetic bool
		want      etcd.Member
		wantErr   string
	}{
		{
			name: "A record of a started member gives its etcd ID, name and Node",
			rec:  v1alpha1.MemberRemovalStatus{Member: "cp-1", MemberID: "1a", NodeName: "cp-1"},
			want: etcd.Member{ID: 0x1a, Name: "cp-1", NodeName: "cp-1"},
		},
		{
			name: "A member that never started is recorded by its ID and has no name",
			rec:  v1alpha1.MemberRemovalStatus{Member: etcd.Member{ID: 0x2b}.String(), MemberID: "2b"},
			want: etcd.Member{ID: 0x2b},
		},
		{name: "A record without an ID names no etcd member", rec: v1alpha1.MemberRemovalStatus{Member: "cp-1"}, wantErr: "not an etcd member ID"},
		{name: "A zero ID is no etcd member ID", rec: v1alpha1.MemberRemovalStatus{Member: "cp-1", MemberID: "0"}, wantErr: "not an etcd member ID"},
		{name: "An ID that is not hexadecimal is no etcd member ID", rec: v1alpha1.MemberRemovalStatus{Member: "cp-1", MemberID: "zz"}, wantErr: "not an etcd member ID"},
		{
			name:      "A backend without etcd's IDs gets the member by name and Node, with no ID",
			rec:       v1alpha1.MemberRemovalStatus{Member: "cp-1-3f2a9c1e", NodeName: "cp-1"},
			synthetic: true,
			want:      etcd.Member{Name: "cp-1-3f2a9c1e", NodeName: "cp-1"},
		},
		{
			name:      "A record an earlier version wrote with a synthetic ID gives the member by name and Node, without that ID",
			rec:       v1alpha1.MemberRemovalStatus{Member: "cp-1-3f2a9c1e", MemberID: "1b57f0c2aa9d3e41", NodeName: "cp-1"},
			synthetic: true,
			want:      etcd.Member{Name: "cp-1-3f2a9c1e", NodeName: "cp-1"},
		},
		{
			name:      "A backend without etcd's IDs refuses a record without a Node",
			rec:       v1alpha1.MemberRemovalStatus{Member: "cp-1-3f2a9c1e", MemberID: "1b57f0c2aa9d3e41"},
			synthetic: true,
			wantErr:   "identifies a member by its name and Node",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m, err := recordedMember(tt.rec, tt.synthetic)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(m).To(Equal(tt.want))
		})
	}
}

// firstGhost is the member scanGhosts would remove first.
func (s *scope) firstGhost() (etcd.Member, bool) {
	scan := s.scanGhosts()
	if len(scan.ghosts) == 0 {
		return etcd.Member{}, false
	}
	return scan.ghosts[0], true
}
