package quorumguard

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	etcdfake "github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

// k3sEmbeddedHook is the hook of a provider that embeds the removal flow (pkg/etcd/hook).
const k3sEmbeddedHook = clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/k3s-etcd"

func TestMemberRemover(t *testing.T) {
	tests := []struct {
		name         string
		annotations  map[string]string
		mode         v1alpha1.Mode
		embeddedHook string
		want         bool
	}{
		{name: "etcd-adapter's hook in mode Manage", mode: v1alpha1.ModeManage,
			annotations: map[string]string{v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue}, want: true},
		{name: "etcd-adapter's hook in mode Observe is taken off without a removal", mode: v1alpha1.ModeObserve,
			annotations: map[string]string{v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue}},
		{name: "etcd-adapter's hook a person asked to release without a removal", mode: v1alpha1.ModeManage,
			annotations: map[string]string{v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue, v1alpha1.ReleaseHookAnnotation: v1alpha1.ReleaseHookValue}},
		{name: "KubeadmControlPlane's kcp-cleanup in mode Observe", mode: v1alpha1.ModeObserve,
			annotations: map[string]string{v1alpha1.KCPHookAnnotation: ""}, want: true},
		{name: "CAPRKE2's rke2-cleanup in mode Observe", mode: v1alpha1.ModeObserve,
			annotations: map[string]string{v1alpha1.RKE2HookAnnotation: ""}, want: true},
		{name: "cluster-api-k3s's bare hook", mode: v1alpha1.ModeObserve,
			annotations: map[string]string{v1alpha1.LegacyK3sHookAnnotation: v1alpha1.LegacyK3sHookValue}, want: true},
		{name: "the bare hook key with another owner removes nothing", mode: v1alpha1.ModeObserve,
			annotations: map[string]string{v1alpha1.LegacyK3sHookAnnotation: "someone"}},
		{name: "another controller's pre-terminate hook removes nothing", mode: v1alpha1.ModeManage,
			annotations: map[string]string{clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/backup": ""}},
		{name: "no hook", mode: v1alpha1.ModeObserve},
		{name: "the hook the control plane names as its provider's embedded removal, in mode Observe", mode: v1alpha1.ModeObserve, embeddedHook: k3sEmbeddedHook,
			annotations: map[string]string{k3sEmbeddedHook: "k3s"}, want: true},
		{name: "the same hook key when the control plane names none removes nothing", mode: v1alpha1.ModeObserve,
			annotations: map[string]string{k3sEmbeddedHook: "k3s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations}}
			cpe := &v1alpha1.ControlPlaneEtcd{Spec: v1alpha1.ControlPlaneEtcdSpec{Mode: tt.mode}}
			g.Expect(memberRemover(m, cpe, tt.embeddedHook) != "").To(Equal(tt.want))
		})
	}
}

// TestGuard_noRemover: in mode Observe with no control-plane provider hook, a deleting Machine's
// infrastructure goes with its member still voting: of a healthy 3-member control plane one
// Machine may go (2 of 3 voters answer), not a second (1 of 3); with KCP's hook on them both may
// go, since KCP removes each member first.
func TestGuard_noRemover(t *testing.T) {
	tests := []struct {
		name        string
		hook        string
		embedded    bool
		wantAllowed bool
		wantMessage string
	}{
		{name: "no remover: the second deletion is refused",
			wantMessage: "deleting Machine m-cp-1 would lose etcd quorum of Cluster c (WouldLoseQuorum) with the deletions of Machines m-cp-0 already under way: once etcd members cp-0, cp-1, which nothing removes before their Machines' infrastructure is deleted, stop answering, quorum is lost: 1 of 3 voters are healthy"},
		{name: "KCP's kcp-cleanup removes the members: the second deletion is allowed", hook: v1alpha1.KCPHookAnnotation, wantAllowed: true},
		{name: "a provider's hook that its control plane names as embedded removal removes the members: the second deletion is allowed",
			hook: k3sEmbeddedHook, embedded: true, wantAllowed: true},
		{name: "the same hook, not named by the control plane, removes nothing: the second deletion is refused", hook: k3sEmbeddedHook,
			wantMessage: "which nothing removes before their Machines' infrastructure is deleted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := &recorder{}
			guard := newGuard(&etcdfake.Cluster{ObserveResponse: healthy(3)}, rec)
			cpe := &v1alpha1.ControlPlaneEtcd{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
				Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c", Backend: v1alpha1.BackendKubeadm, Mode: v1alpha1.ModeObserve},
			}
			observed := func(node string) *clusterv1.Machine {
				m := machine("m-"+node, node, false)
				m.Annotations = map[string]string{}
				if tt.hook != "" {
					m.Annotations[tt.hook] = ""
				}
				return m
			}
			var objs []client.Object
			for i := range 3 {
				m := observed(fmt.Sprintf("cp-%d", i))
				if i == 0 {
					m.Finalizers = []string{"test"}
					m.DeletionTimestamp = &metav1.Time{Time: time.Now().Add(-time.Second)}
				}
				objs = append(objs, m)
			}
			cl := cluster()
			cl.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "c"}
			cp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
			if tt.embedded {
				cp.Annotations = map[string]string{hook.EmbeddedRemovalAnnotation: k3sEmbeddedHook}
			}
			c := clientWith(append(objs, cl, cpe, cp)...)
			guard.Client, guard.APIReader, guard.Writer = c, c, c

			resp := guard.Handle(context.Background(), deleteRequest(g, observed("cp-1"), false))

			g.Expect(resp.Allowed).To(Equal(tt.wantAllowed), "%+v", resp.Result)
			if !tt.wantAllowed {
				g.Expect(resp.Result.Message).To(ContainSubstring(tt.wantMessage))
			}
		})
	}
}
