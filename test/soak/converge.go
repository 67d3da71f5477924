package soak

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// convergeTimeout bounds how long a deletion may take once the world is healed: Cluster API's
// drain, the member's removal and the Machine's deletion.
const convergeTimeout = 3 * time.Minute

// converge heals the world (every stopped member that etcd still lists starts again, its Node
// condition cleared), then waits until every deleting Machine is gone. One that is not must be
// explained by the ControlPlaneEtcd (a condition naming it); otherwise it is a violation.
func (s *scenario) converge(ctx context.Context) {
	s.mu.Lock()
	var stopped []string
	for name, on := range s.stopped {
		if on {
			stopped = append(stopped, name)
		}
	}
	s.mu.Unlock()
	for _, name := range stopped {
		m := s.etcd.Member(name)
		// Note: a member etcd did not answer about (no quorum) is started too: only one that etcd
		// answered without was removed.
		if _, removed := s.listed(ctx, m.ID()); !removed {
			if err := m.Restart(ctx); err != nil {
				s.logf("  heal: member %s did not start again: %s", name, firstLine(err.Error()))
			}
		}
		_ = s.setNodeCondition(ctx, s.nodeOfMember(name), corev1.ConditionFalse)
		s.mu.Lock()
		delete(s.stopped, name)
		s.mu.Unlock()
	}
	deadline := time.Now().Add(convergeTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if len(s.deleting(ctx)) == 0 {
			return
		}
		time.Sleep(time.Second)
	}
	cpe := &v1alpha1.ControlPlaneEtcd{}
	_ = s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.cluster.Name}, cpe)
	for _, name := range s.deleting(ctx) {
		if why := explains(cpe, name); why != "" {
			s.mu.Lock()
			s.waits = append(s.waits, name+": "+why)
			s.mu.Unlock()
			s.logf("  Machine %s still deleting after %s, and says why: %s", name, convergeTimeout, why)
			continue
		}
		s.violate("Machine %s did not finish deleting within %s of the world healing, and no condition of the ControlPlaneEtcd says why", name, convergeTimeout)
	}
}

// deleting lists the Machines of the scenario that are deleting.
func (s *scenario) deleting(ctx context.Context) []string {
	list := &clusterv1.MachineList{}
	if err := s.c.List(ctx, list, client.InNamespace(s.ns)); err != nil {
		return nil
	}
	var out []string
	for _, m := range list.Items {
		if !m.DeletionTimestamp.IsZero() {
			out = append(out, m.Name)
		}
	}
	return out
}

// explains returns the reason and message of a condition of the ControlPlaneEtcd that names the
// Machine, or of its status.removal when it is about the Machine.
func explains(cpe *v1alpha1.ControlPlaneEtcd, machine string) string {
	for _, c := range cpe.Status.Conditions {
		if strings.Contains(c.Message, machine) {
			return c.Type + "/" + c.Reason + ": " + firstLine(c.Message)
		}
	}
	if r := cpe.Status.Removal; r != nil && r.MachineName == machine {
		return "status.removal: " + string(r.Result)
	}
	return ""
}
