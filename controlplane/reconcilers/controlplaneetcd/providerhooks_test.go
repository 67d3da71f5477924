package controlplaneetcd

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

func Test_orderBefore(t *testing.T) {
	kcp := func(version string) controlPlaneFacts {
		return controlPlaneFacts{Kind: kubeadmControlPlaneKind, Version: version}
	}
	tests := []struct {
		name     string
		key      string
		cp       controlPlaneFacts
		wantWait bool
		reason   string
	}{
		{"KCP's hook for Kubernetes 1.31 waits for every other hook, so ours runs before it", v1alpha1.KCPHookAnnotation, kcp("v1.31.0"), false, ">= 1.31.0"},
		{"KCP's hook for a newer Kubernetes also waits for every other hook", v1alpha1.KCPHookAnnotation, kcp("v1.36.3"), false, ">= 1.31.0"},
		{"A 1.31 pre-release counts as 1.31, as KCP compares without pre-releases", v1alpha1.KCPHookAnnotation, kcp("v1.31.0-rc.1"), false, ">= 1.31.0"},
		{"KCP's hook for Kubernetes 1.30 does not wait for other hooks, so ours waits for it", v1alpha1.KCPHookAnnotation, kcp("v1.30.9"), true, "< 1.31.0"},
		{"KCP's hook with an unknown version is waited for", v1alpha1.KCPHookAnnotation, kcp(""), true, "not a version"},
		{"KCP's hook with an unparsable version is waited for", v1alpha1.KCPHookAnnotation, kcp("latest"), true, "not a version"},
		{"A kcp-cleanup hook under another control-plane kind is waited for", v1alpha1.KCPHookAnnotation, controlPlaneFacts{Kind: "K0sControlPlane", Version: "v1.33.0"}, true, "not a KubeadmControlPlane"},
		{"CAPRKE2's hook always waits for every other hook, so ours runs before it", v1alpha1.RKE2HookAnnotation, controlPlaneFacts{Kind: "RKE2ControlPlane"}, false, "rke2-cleanup"},
		{"Any other hook is waited for", clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/backup", kcp("v1.36.3"), true, "still work"},
		{"The legacy cluster-api-k3s hook is waited for", v1alpha1.LegacyK3sHookAnnotation, controlPlaneFacts{Kind: "KThreesControlPlane"}, true, "still work"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := orderBefore(tt.key, tt.cp)
			g.Expect(got.Wait).To(Equal(tt.wantWait))
			g.Expect(got.Reason).To(ContainSubstring(tt.reason))
		})
	}
}

func Test_scope_otherPreTerminateHooks_providerHooks(t *testing.T) {
	hooks := func(keys ...string) *clusterv1.Machine {
		a := map[string]string{v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue}
		for _, k := range keys {
			a[k] = ""
		}
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Annotations: a}}
	}
	backup := clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/backup"
	tests := []struct {
		name string
		cp   controlPlaneFacts
		m    *clusterv1.Machine
		want []string
	}{
		{"KCP's hook on Kubernetes 1.36 is not waited for", controlPlaneFacts{Kind: kubeadmControlPlaneKind, Version: "v1.36.3"},
			hooks(v1alpha1.KCPHookAnnotation), nil},
		{"KCP's hook on Kubernetes 1.30 is waited for", controlPlaneFacts{Kind: kubeadmControlPlaneKind, Version: "v1.30.2"},
			hooks(v1alpha1.KCPHookAnnotation), []string{v1alpha1.KCPHookAnnotation}},
		{"CAPRKE2's hook is not waited for, a third hook still is", controlPlaneFacts{Kind: "RKE2ControlPlane"},
			hooks(v1alpha1.RKE2HookAnnotation, backup), []string{backup}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := testScope(1)
			s.controlPlaneFacts = tt.cp
			g.Expect(s.otherPreTerminateHooks(tt.m)).To(Equal(tt.want))
		})
	}
}

func Test_anyDeletingWith(t *testing.T) {
	now := metav1.Now()
	g := NewWithT(t)
	held := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.KCPHookAnnotation: ""}}}
	g.Expect(anyDeletingWith([]*clusterv1.Machine{held}, v1alpha1.KCPHookAnnotation)).To(BeFalse(), "a Machine that is not deleting does not need the order")
	held.DeletionTimestamp = &now
	g.Expect(anyDeletingWith([]*clusterv1.Machine{held}, v1alpha1.KCPHookAnnotation)).To(BeTrue())
}

// Test_hookKeysAgree checks that the hook keys api/v1alpha1 names are those of pkg/etcd/hook,
// which a provider embedding the flow and the quorum guard read alike. (api/v1alpha1 cannot
// alias them while pkg/etcd imports it.)
func Test_hookKeysAgree(t *testing.T) {
	g := NewWithT(t)
	g.Expect(hook.ManagerHookKey).To(Equal(v1alpha1.PreTerminateHookAnnotation))
	g.Expect(hook.ManagerHookValue).To(Equal(v1alpha1.PreTerminateHookValue))
	g.Expect(hook.KCPHookKey).To(Equal(v1alpha1.KCPHookAnnotation))
	g.Expect(hook.RKE2HookKey).To(Equal(v1alpha1.RKE2HookAnnotation))
	g.Expect(hook.PreTerminateHookPrefix).To(Equal(clusterv1.PreTerminateDeleteHookAnnotationPrefix))
	g.Expect(hook.WaitingForPreTerminateHookReason).To(Equal(clusterv1.MachineDeletingWaitingForPreTerminateHookReason))
	g.Expect(hook.ReleaseHookAnnotation).To(Equal(v1alpha1.ReleaseHookAnnotation))
	g.Expect(hook.RetryRemovalAnnotation).To(Equal(v1alpha1.RetryRemovalAnnotation))
	g.Expect(hook.AnnotationTrue).To(Equal(v1alpha1.AnnotationTrue))
}
