package controlplaneetcd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// ensureHooks puts the pre-terminate hook on every Machine hosting members (memberMachines: the
// control-plane Machines, or an EtcdadmCluster's etcd Machines) that is not deleting, so any
// deletion (scale-down, remediation, kubectl delete) drains the Node before the member is
// removed. Adding a hook is no membership change, so all Machines are handled in one pass.
// Note: the Machine hook webhook (controlplane/webhooks/machinehook) adds the hook at creation;
// this is the backstop for Machines created before the Cluster was managed, while the webhook
// could not tell (the Cluster did not exist yet), or with webhooks off.
func (r *Reconciler) ensureHooks(ctx context.Context, s *scope) error {
	for _, m := range s.memberMachines() {
		if !m.DeletionTimestamp.IsZero() || m.Annotations[v1alpha1.PreTerminateHookAnnotation] != "" {
			continue
		}
		before := m.DeepCopy()
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[v1alpha1.PreTerminateHookAnnotation] = v1alpha1.PreTerminateHookValue
		if err := r.Client.Patch(ctx, m, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("failed to add the pre-terminate hook to Machine %s: %w", klog.KObj(m), err)
		}
	}
	return nil
}

// holdsMachine reports whether a hook this controller releases holds the Machine: its own, or
// the legacy cluster-api-k3s hook when no KThreesControlPlane is left to release it.
func (s *scope) holdsMachine(m *clusterv1.Machine) bool {
	if m.Annotations[v1alpha1.PreTerminateHookAnnotation] != "" {
		return true
	}
	return s.adoptsLegacyHook(m)
}

func (s *scope) adoptsLegacyHook(m *clusterv1.Machine) bool {
	return s.legacyHookAdoptable && m.Annotations[v1alpha1.LegacyK3sHookAnnotation] == v1alpha1.LegacyK3sHookValue
}

// otherPreTerminateHooks lists the pre-terminate hooks on m that this controller waits for:
// every hook it does not release, except a provider's own etcd hook that itself waits for all
// other hooks (KCP's kcp-cleanup for Kubernetes >= 1.31, CAPRKE2's rke2-cleanup). Ours runs
// just before such a hook, since each waiting for the other would hang the deletion for ever
// (see orderBefore).
func (s *scope) otherPreTerminateHooks(m *clusterv1.Machine) []string {
	var out []string
	for k := range m.Annotations {
		if !strings.HasPrefix(k, clusterv1.PreTerminateDeleteHookAnnotationPrefix) || k == v1alpha1.PreTerminateHookAnnotation {
			continue
		}
		if k == v1alpha1.LegacyK3sHookAnnotation && s.adoptsLegacyHook(m) {
			continue
		}
		if !orderBefore(k, s.controlPlaneFacts).Wait {
			continue
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
