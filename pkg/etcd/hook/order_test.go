package hook_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

func TestOrderBefore(t *testing.T) {
	kcp := func(version string) hook.ControlPlane {
		return hook.ControlPlane{Kind: hook.KubeadmControlPlaneKind, Version: version}
	}
	k3sHook := hook.PreTerminateHookPrefix + "/k3s-etcd"
	tests := []struct {
		name     string
		key      string
		cp       hook.ControlPlane
		wantWait bool
		reason   string
	}{
		{"KCP's hook for Kubernetes 1.31 waits for every other hook, so ours runs before it", hook.KCPHookKey, kcp("v1.31.0"), false, ">= 1.31.0"},
		{"KCP's hook for a newer Kubernetes also waits for every other hook", hook.KCPHookKey, kcp("v1.36.3"), false, ">= 1.31.0"},
		{"a 1.31 pre-release counts as 1.31, as KCP compares without pre-releases", hook.KCPHookKey, kcp("v1.31.0-rc.1"), false, ">= 1.31.0"},
		{"KCP's hook for Kubernetes 1.30 does not wait for other hooks, so ours waits for it", hook.KCPHookKey, kcp("v1.30.9"), true, "< 1.31.0"},
		{"KCP's hook with an unknown version is waited for", hook.KCPHookKey, kcp(""), true, "not a version"},
		{"KCP's hook with an unparsable version is waited for", hook.KCPHookKey, kcp("latest"), true, "not a version"},
		{"a kcp-cleanup hook under another control-plane kind is waited for", hook.KCPHookKey, hook.ControlPlane{Kind: "K0sControlPlane", Version: "v1.33.0"}, true, "not a KubeadmControlPlane"},
		{"CAPRKE2's hook always waits for every other hook, so ours runs before it", hook.RKE2HookKey, hook.ControlPlane{Kind: "RKE2ControlPlane"}, false, "rke2-cleanup"},
		{"the hook of a provider that embeds the flow runs last", k3sHook, hook.ControlPlane{Kind: "KThreesControlPlane", EmbeddedRemovalHook: k3sHook}, false, hook.EmbeddedRemovalAnnotation},
		{"the same hook without the annotation is waited for", k3sHook, hook.ControlPlane{Kind: "KThreesControlPlane"}, true, "still work"},
		{"any other hook is waited for", hook.PreTerminateHookPrefix + "/backup", kcp("v1.36.3"), true, "still work"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := hook.OrderBefore(tt.key, tt.cp)
			g.Expect(got.Wait).To(Equal(tt.wantWait))
			g.Expect(got.Reason).To(ContainSubstring(tt.reason))
		})
	}
}

func TestOtherHooks(t *testing.T) {
	own := hook.PreTerminateHookPrefix + "/k3s-etcd"
	backup := hook.PreTerminateHookPrefix + "/backup"
	tests := []struct {
		name        string
		annotations map[string]string
		cp          hook.ControlPlane
		want        []string
	}{
		{"only its own hook", map[string]string{own: "k3s"}, hook.ControlPlane{}, nil},
		{"other hooks and annotations: only hooks count, sorted", map[string]string{own: "", backup: "", hook.ManagerHookKey: "", "other": ""}, hook.ControlPlane{},
			[]string{backup, hook.ManagerHookKey}},
		{"a run-last hook is not waited for", map[string]string{own: "", hook.RKE2HookKey: ""}, hook.ControlPlane{}, nil},
		{"the bare legacy cluster-api-k3s hook is a hook", map[string]string{own: "", hook.PreTerminateHookPrefix: "k3s"}, hook.ControlPlane{}, []string{hook.PreTerminateHookPrefix}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(hook.OtherHooks(tt.annotations, own, tt.cp)).To(Equal(tt.want))
		})
	}
}

func TestEmbeddedRemovalHookOf(t *testing.T) {
	own := hook.PreTerminateHookPrefix + "/k3s-etcd"
	tests := []struct {
		name         string
		annotations  map[string]string
		wantKey      string
		wantEmbedded bool
		wantErr      string
	}{
		{"no annotation", nil, "", false, ""},
		{"a provider's hook key", map[string]string{hook.EmbeddedRemovalAnnotation: own}, own, true, ""},
		{"a value that is no hook key still says the provider removes members", map[string]string{hook.EmbeddedRemovalAnnotation: "true"}, "", true, "names no pre-terminate hook"},
		{"the manager's own hook is refused", map[string]string{hook.EmbeddedRemovalAnnotation: hook.ManagerHookKey}, "", true, "manager's own hook"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			key, embedded, err := hook.EmbeddedRemovalHookOf(tt.annotations)
			g.Expect(key).To(Equal(tt.wantKey))
			g.Expect(embedded).To(Equal(tt.wantEmbedded))
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			}
		})
	}
}
