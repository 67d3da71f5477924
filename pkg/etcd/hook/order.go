package hook

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Control-plane providers put an etcd hook of their own on their Machines, and some of them
// release it only once every other pre-terminate hook is gone ("run last"). If a hook that
// removes members waited for such a hook, each would wait for the other for ever, so it runs
// just before it instead: it removes the member and releases, and the run-last hook then finds
// the member gone and only releases.
//
//   - KubeadmControlPlane (cluster-api v1.14.2,
//     controlplane/kubeadm/reconcilers/kubeadmcontrolplane/kubeadmcontrolplane_controller.go,
//     reconcilePreTerminateHook): for spec.version >= 1.31.0 (pre-releases count as their
//     release) it waits while machineHasOtherPreTerminateHooks, and a member already gone is
//     done (controlplane/kubeadm/pkg/workload_cluster_etcd.go RemoveEtcdMember). For older
//     versions it does not wait, so it is waited for: KCP removes the member first.
//   - RKE2ControlPlane (rancher/cluster-api-provider-rke2,
//     controlplane/internal/controllers/lifecycle_hook.go, reconcilePreTerminateHook): always
//     waits while machineHasOtherHooks, and releases once etcd.rke2.cattle.io/removed-node-name
//     is set, which the earlier removal already wrote.
//   - A provider that embeds this flow (EmbeddedRemovalAnnotation on its control-plane object)
//     waits for every other hook too (MayAct), so the etcd-adapter manager runs before it.
//
// Every other hook goes first: removing the member stops the Node's etcd and, on K3s and RKE2,
// its apiserver, which other hooks may still need.

// KubeadmControlPlaneKind is Cluster API's KubeadmControlPlane kind.
const KubeadmControlPlaneKind = "KubeadmControlPlane"

// kcpWaitsForOtherHooksFrom is the first Kubernetes version for which KCP's kcp-cleanup hook
// waits until it is the last pre-terminate hook.
var kcpWaitsForOtherHooksFrom = version.MajorMinor(1, 31)

// ControlPlane is what the hook order depends on about a Cluster's control-plane object.
type ControlPlane struct {
	// Kind is the control-plane kind the Cluster references ("" when none).
	Kind string
	// Version is its spec.version; "" when it has none or it could not be read.
	Version string
	// EmbeddedRemovalHook is the value of EmbeddedRemovalAnnotation on it: the hook key with
	// which its provider removes members itself; "" when it has none.
	EmbeddedRemovalHook string
}

// Order is whether a hook that removes members waits for another pre-terminate hook, and why.
type Order struct {
	// Wait is true when the other hook goes first.
	Wait bool
	// Reason says why, for messages.
	Reason string
}

// OrderBefore decides whether a hook that removes members waits for the pre-terminate hook key on
// the same Machine to be released first. A hook that itself waits for every other hook is not
// waited for (the member removal runs just before it); every other hook is.
func OrderBefore(key string, cp ControlPlane) Order {
	switch {
	case key == RKE2HookKey:
		return Order{Reason: "cluster-api-provider-rke2 releases rke2-cleanup only after every other pre-terminate hook, and finds the member removed"}
	case key == KCPHookKey:
		return orderBeforeKCP(cp)
	case key != "" && key == cp.EmbeddedRemovalHook:
		return Order{Reason: fmt.Sprintf("the %s's provider removes members in %s (annotation %s) only after every other pre-terminate hook", kindOr(cp.Kind), key, EmbeddedRemovalAnnotation)}
	}
	return Order{Wait: true, Reason: "other pre-terminate hooks run while the Node's etcd member and apiserver still work"}
}

func orderBeforeKCP(cp ControlPlane) Order {
	if cp.Kind != KubeadmControlPlaneKind {
		return Order{Wait: true, Reason: fmt.Sprintf("the control plane is a %q, not a KubeadmControlPlane, so kcp-cleanup is not known to wait for other hooks", cp.Kind)}
	}
	v, err := version.ParseGeneric(cp.Version)
	if err != nil {
		return Order{Wait: true, Reason: fmt.Sprintf("the KubeadmControlPlane's spec.version %q is not a version, so whether kcp-cleanup waits for other hooks is not known", cp.Version)}
	}
	// Note: ParseGeneric drops pre-releases, as KCP compares (version.WithoutPreReleases).
	if v.AtLeast(kcpWaitsForOtherHooksFrom) {
		return Order{Reason: fmt.Sprintf("KubeadmControlPlane releases kcp-cleanup for version %s (>= 1.31.0) only after every other pre-terminate hook, and finds the member removed", cp.Version)}
	}
	return Order{Wait: true, Reason: fmt.Sprintf("KubeadmControlPlane runs kcp-cleanup for version %s (< 1.31.0) without waiting for other hooks; it removes the member first", cp.Version)}
}

func kindOr(kind string) string {
	if kind == "" {
		return "control plane"
	}
	return kind
}

// OtherHooks lists, sorted, the pre-terminate hooks in annotations that the hook own waits for:
// every one but own and those that run last (OrderBefore).
func OtherHooks(annotations map[string]string, own string, cp ControlPlane) []string {
	var out []string
	for k := range annotations {
		if !IsPreTerminateHook(k) || k == own || !OrderBefore(k, cp).Wait {
			continue
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// IsPreTerminateHook reports whether the annotation key is a pre-terminate hook, as Cluster API
// tells them (annotations.GetWithPrefix of PreTerminateHookPrefix).
func IsPreTerminateHook(key string) bool {
	return strings.HasPrefix(key, PreTerminateHookPrefix)
}

// EmbeddedRemovalHookOf reads EmbeddedRemovalAnnotation from a control-plane object's
// annotations: whether the provider says it embeds the flow, and the hook key it names when
// that is a valid one. A value that is not a pre-terminate hook key, or is the manager's, still
// says the provider removes members; err says what is wrong with it.
func EmbeddedRemovalHookOf(annotations map[string]string) (key string, embedded bool, err error) {
	v, ok := annotations[EmbeddedRemovalAnnotation]
	switch {
	case !ok:
		return "", false, nil
	case !IsPreTerminateHook(v):
		return "", true, fmt.Errorf("annotation %s=%q names no pre-terminate hook (a key starting with %s/)", EmbeddedRemovalAnnotation, v, PreTerminateHookPrefix)
	case v == ManagerHookKey:
		return "", true, fmt.Errorf("annotation %s names %s, the etcd-adapter manager's own hook; the provider's hook needs a key of its own", EmbeddedRemovalAnnotation, v)
	}
	return v, true, nil
}
