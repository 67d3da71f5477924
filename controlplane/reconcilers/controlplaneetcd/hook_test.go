package controlplaneetcd

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
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
			m.Annotations = map[string]string{v1alpha1.ReleaseHookAnnotation: "yes"}
		}, "released by annotation"},
		{"A deleting Cluster releases", func(s *scope, _ *clusterv1.Machine) { s.cluster.DeletionTimestamp = &deleting }, "Cluster is being deleted"},
		{"A deleting control plane releases", func(s *scope, _ *clusterv1.Machine) { s.controlPlaneDeleting = true }, "control plane is being deleted"},
		{"A Machine that never had a Node and hosts no member releases", func(_ *scope, m *clusterv1.Machine) {
			m.Name, m.Status.NodeRef = "m-new", clusterv1.MachineNodeReference{}
		}, "never had a Node"},
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
