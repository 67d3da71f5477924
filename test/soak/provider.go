package soak

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// providerInterval is how often the provider stand-in looks at the Machines.
const providerInterval = 500 * time.Millisecond

// provider plays the parts of the control-plane provider that run on their own: the owner's
// remediation of a Machine the MachineHealthCheck marked (KCP remediation.go deletes one
// Machine at a time), and the provider's own pre-terminate hook (KCP v1.14
// lifecycle_hook.go reconcilePreTerminateHook: it waits until its hook is the last pre-terminate
// hook, removes the member if listed, then removes its hook; cluster-api-k3s asks K3s to remove
// the member through the Node's remove annotation and waits for removed-node-name).
func (s *scenario) provider(ctx context.Context) {
	t := time.NewTicker(providerInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.providerStep(ctx)
		}
	}
}

func (s *scenario) providerStep(ctx context.Context) {
	list := &clusterv1.MachineList{}
	if err := s.c.List(ctx, list, client.InNamespace(s.ns)); err != nil {
		return
	}
	deleting := false
	for i := range list.Items {
		deleting = deleting || !list.Items[i].DeletionTimestamp.IsZero()
	}
	for i := range list.Items {
		m := &list.Items[i]
		rec := s.recByName(m.Name)
		if rec == nil {
			continue
		}
		if m.DeletionTimestamp.IsZero() {
			if !deleting && conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedCondition) {
				s.deleteMachine(ctx, rec, "owner remediation")
				deleting = true
			}
			continue
		}
		s.releaseProviderHook(ctx, m, rec)
	}
}

func (s *scenario) recByName(name string) *machineRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.machines {
		if m.name == name {
			return m
		}
	}
	return nil
}

func (s *scenario) releaseProviderHook(ctx context.Context, m *clusterv1.Machine, rec *machineRec) {
	if rec.providerHook == "" || m.Annotations == nil {
		return
	}
	if _, ok := m.Annotations[rec.providerHook]; !ok {
		return
	}
	switch rec.providerHook {
	case kcpHook:
		for k := range m.Annotations {
			if k != kcpHook && strings.HasPrefix(k, clusterv1.PreTerminateDeleteHookAnnotationPrefix) {
				return // KCP's hook runs last.
			}
		}
		if rec.member != nil {
			if err := s.removeMember(ctx, rec, "KCP"); err != nil {
				s.logf("  KCP: %s", firstLine(err.Error()))
				return
			}
		}
	case k3sHook:
		if !s.k3sRemoved(ctx, rec) {
			return
		}
	}
	if err := s.patchMachine(ctx, m.Name, func(ann map[string]string) { delete(ann, rec.providerHook) }); err == nil {
		s.logf("  provider released its hook on Machine %s", m.Name)
	}
}

// k3sRemoved asks K3s to remove the Node's member (etcd.k3s.cattle.io/remove) and reports
// whether removed-node-name says it did, as cluster-api-k3s waits for it.
func (s *scenario) k3sRemoved(ctx context.Context, rec *machineRec) bool {
	n := &corev1.Node{}
	if err := s.wl.Client.Get(ctx, client.ObjectKey{Name: rec.node}, n); err != nil {
		return client.IgnoreNotFound(err) == nil
	}
	keys := s.k3s.Simulator.Profile().Keys
	if n.Annotations[keys.RemovedNodeName] != "" {
		return true
	}
	if n.Annotations[keys.Remove] != "true" {
		if rec.member != nil {
			s.markWorldRemoved(rec.member.ID(), "K3s, asked by cluster-api-k3s")
		}
		before := n.DeepCopy()
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[keys.Remove] = "true"
		_ = s.wl.Client.Patch(ctx, n, client.MergeFrom(before))
	}
	return false
}

func (s *scenario) patchMachine(ctx context.Context, name string, change func(map[string]string)) error {
	m := &clusterv1.Machine{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, m); err != nil {
		return err
	}
	before := m.DeepCopy()
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	change(m.Annotations)
	return s.c.Patch(ctx, m, client.MergeFrom(before))
}
