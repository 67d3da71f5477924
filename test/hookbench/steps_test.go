package hookbench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env/k3ssim"
)

// stepTimeout bounds one step (a deletion, a join, a failure showing) on a busy machine.
const stepTimeout = 3 * time.Minute

// timing is what one measured step took, as this benchmark's watches saw it.
type timing struct {
	// total is the whole step: for a deletion from the Machine entering
	// WaitingForPreTerminateHook to the hook released; for a failure from the member stopped to
	// the status saying it is not healthy.
	total time.Duration
	// k3s is the part K3s had, on K3s clusters: from the removal request (remove=true) on the
	// Node to the first evidence etcd-adapter waits for (EtcdIsVoter NotAMember, Ready not
	// True, or the Node gone); from the member stopped to the leader's K3s writing EtcdIsVoter
	// not True. Zero for kubeadm, where etcd-adapter talks to etcd itself.
	k3s time.Duration
}

// adapter is etcd-adapter's own part of the step.
func (t timing) adapter() time.Duration { return t.total - t.k3s }

// deleteOldest deletes the Machine of the oldest Node and reports how long it waited in
// WaitingForPreTerminateHook before etcd-adapter released its hook. Every instant is when a
// watch of this benchmark saw the change, so the watches' own delay cancels out.
func (c *cluster) deleteOldest(ctx context.Context) (timing, error) {
	node := c.nodes[0]
	m := c.machines[node]
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	w, err := c.p.c.Watch(ctx, &clusterv1.MachineList{}, client.InNamespace(m.Namespace), client.MatchingFields{"metadata.name": m.Name})
	if err != nil {
		return timing{}, fmt.Errorf("failed to watch Machine %s: %w", m.Name, err)
	}
	defer w.Stop()
	nodeTimes, err := c.watchRemoval(ctx, node)
	if err != nil {
		return timing{}, err
	}
	if err := c.p.c.Delete(ctx, m); err != nil {
		return timing{}, fmt.Errorf("failed to delete Machine %s: %w", m.Name, err)
	}
	waiting, released, err := hookTimes(ctx, w)
	if err != nil {
		return timing{}, fmt.Errorf("Machine %s: %w", m.Name, err)
	}
	d := timing{total: released.Sub(waiting)}
	if c.k3sKeys != nil {
		requested, evidence := nodeTimes()
		if requested.IsZero() || evidence.IsZero() || evidence.Before(requested) {
			return timing{}, fmt.Errorf("Machine %s: the hook was released, but the Node did not show a removal request followed by K3s's evidence (requested %v, evidence %v)", m.Name, requested, evidence)
		}
		d.k3s = evidence.Sub(requested)
	}
	return d, c.afterDeletion(ctx, m, node)
}

// watchRemoval watches the Node of a K3s cluster and returns a function that reports when the
// removal request and K3s's first evidence of the removal were first seen.
func (c *cluster) watchRemoval(ctx context.Context, node string) (func() (requested, evidence time.Time), error) {
	if c.k3sKeys == nil {
		return func() (time.Time, time.Time) { return time.Time{}, time.Time{} }, nil
	}
	wl, err := client.NewWithWatch(c.wlConfig, client.Options{})
	if err != nil {
		return nil, err
	}
	w, err := wl.Watch(ctx, &corev1.NodeList{}, client.MatchingFields{"metadata.name": node})
	if err != nil {
		return nil, fmt.Errorf("failed to watch Node %s: %w", node, err)
	}
	var mu sync.Mutex
	var requested, evidence time.Time
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			now := time.Now()
			n, _ := ev.Object.(*corev1.Node)
			mu.Lock()
			if n != nil && requested.IsZero() && n.Annotations[c.k3sKeys.Remove] == "true" {
				requested = now
			}
			if n != nil && evidence.IsZero() && !requested.IsZero() && (ev.Type == watch.Deleted || removalShows(n)) {
				evidence = now
			}
			mu.Unlock()
		}
	}()
	return func() (time.Time, time.Time) {
		mu.Lock()
		defer mu.Unlock()
		return requested, evidence
	}, nil
}

// removalShows reports whether the Node shows what etcd-adapter's K3s backend takes as evidence
// that the member is gone: the leader's K3s marked it NotAMember, or its server stopped.
func removalShows(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		switch {
		case c.Type == k3ssim.EtcdIsVoterCondition && c.Reason == k3ssim.ReasonNotAMember:
			return true
		case c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue:
			return true
		}
	}
	return false
}

// hookTimes reads the Machine's watch until etcd-adapter's hook is gone, and returns when the
// Machine was first seen waiting for pre-terminate hooks and when the hook was first seen gone.
func hookTimes(ctx context.Context, w watch.Interface) (waiting, released time.Time, _ error) {
	for {
		select {
		case <-ctx.Done():
			return waiting, released, fmt.Errorf("hook not released: %w", context.Cause(ctx))
		case ev, ok := <-w.ResultChan():
			if !ok {
				return waiting, released, errors.New("the watch ended before the hook was released")
			}
			now := time.Now()
			switch ev.Type {
			case watch.Error:
				return waiting, released, fmt.Errorf("watch error: %w", apierrors.FromObject(ev.Object))
			case watch.Deleted:
				released = now
			case watch.Added, watch.Modified:
				m, ok := ev.Object.(*clusterv1.Machine)
				if !ok {
					continue
				}
				if waiting.IsZero() && deletingReason(m) == clusterv1.MachineDeletingWaitingForPreTerminateHookReason {
					waiting = now
				}
				if _, held := m.Annotations[v1alpha1.PreTerminateHookAnnotation]; !held && !m.DeletionTimestamp.IsZero() {
					released = now
				}
			}
			if !released.IsZero() {
				if waiting.IsZero() {
					return waiting, released, errors.New("the hook was released before the Machine was seen waiting for it")
				}
				return waiting, released, nil
			}
		}
	}
}

func deletingReason(m *clusterv1.Machine) string {
	if c := conditions.Get(m, clusterv1.MachineDeletingCondition); c != nil {
		return c.Reason
	}
	return ""
}

// afterDeletion waits until the Machine is gone and its member left etcd, and lets the Node's
// remains go.
func (c *cluster) afterDeletion(ctx context.Context, m *clusterv1.Machine, node string) error {
	err := poll(ctx, stepTimeout, "Machine "+m.Name+" gone", func() (bool, error) {
		err := c.p.c.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return err
	}
	delete(c.machines, node)
	c.nodes = c.nodes[1:]
	return c.afterGone(node)
}

// replace adds a control-plane Machine, joins its member on a new Node as the Machine's
// bootstrap would, binds them and waits for the steady state again.
func (c *cluster) replace(ctx context.Context) error {
	node := fmt.Sprintf("%s-%d", c.cluster.Name, c.seq)
	c.seq++
	m, err := c.p.createMachine(ctx, c.cluster, node)
	if err != nil {
		return err
	}
	if err := c.join(ctx, node); err != nil {
		return fmt.Errorf("failed to join a member on Node %s: %w", node, err)
	}
	if err := c.p.bindNode(ctx, m, c.cluster, c.wl, node); err != nil {
		return err
	}
	c.nodes = append(c.nodes, node)
	c.machines[node] = m
	if err := c.waitSteady(ctx); err != nil {
		return err
	}
	// etcd refuses to remove a member ("unhealthy cluster") unless a quorum of the voters that
	// would remain has been connected to the leader for its HealthInterval (strict
	// reconfiguration check, etcdserver mayRemoveMember); a deletion right after a join would
	// measure that wait, not etcd-adapter.
	time.Sleep(etcdHealthInterval)
	return nil
}

// etcdHealthInterval is etcdserver.HealthInterval.
const etcdHealthInterval = 5 * time.Second

// waitSteady waits until the status shows every member a healthy voter on its Machine, etcd
// available, no removal under way and every Machine held by etcd-adapter's hook.
func (c *cluster) waitSteady(ctx context.Context) error {
	var last *v1alpha1.ControlPlaneEtcd
	err := poll(ctx, stepTimeout, "a steady control plane of "+c.cluster.Name, func() (bool, error) {
		cpe, err := c.status(ctx)
		if err != nil {
			return false, err
		}
		last = cpe
		s := cpe.Status
		if s.HealthyVoters == nil || int(*s.HealthyVoters) != len(c.nodes) || s.Voters == nil || int(*s.Voters) != len(c.nodes) ||
			len(s.Members) != len(c.nodes) || !isTrue(cpe, v1alpha1.AvailableCondition) || isTrue(cpe, v1alpha1.ProgressingCondition) {
			return false, nil
		}
		for _, mem := range s.Members {
			if mem.MachineName == "" {
				return false, nil
			}
		}
		for _, m := range c.machines {
			got := &clusterv1.Machine{}
			if err := c.p.c.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
				return false, err
			}
			if got.Annotations[v1alpha1.PreTerminateHookAnnotation] == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w; last status: %s", err, summary(last))
	}
	return err
}

// summary is the part of a status a failed wait should show.
func summary(cpe *v1alpha1.ControlPlaneEtcd) string {
	var b strings.Builder
	for _, m := range cpe.Status.Members {
		fmt.Fprintf(&b, "member %s on %q (Machine %q): %s %s; ", m.Name, m.NodeName, m.MachineName, m.Health, m.Message)
	}
	for _, cond := range cpe.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s %s: %s; ", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	return b.String()
}

// failAndRecover stops the member on the second-oldest Node and returns how long the status took
// to report it not healthy; then it restarts the member and waits for the steady state.
func (c *cluster) failAndRecover(ctx context.Context) (timing, error) {
	node := c.nodes[1]
	name := c.memberOf(node)
	start := time.Now()
	if err := c.stopMember(ctx, node, name); err != nil {
		return timing{}, err
	}
	var k3sSaid time.Time
	err := poll(ctx, stepTimeout, "the status to report member "+name+" not healthy", func() (bool, error) {
		if c.k3sKeys != nil && k3sSaid.IsZero() {
			said, err := c.voterConditionNotTrue(ctx, node)
			if err != nil {
				return false, err
			}
			if said {
				k3sSaid = time.Now()
			}
		}
		cpe, err := c.status(ctx)
		if err != nil {
			return false, err
		}
		for _, mem := range cpe.Status.Members {
			if mem.NodeName == node && mem.Health != v1alpha1.MemberHealthy {
				return true, nil
			}
		}
		return false, nil
	})
	t := timing{total: time.Since(start)}
	if err != nil {
		return timing{}, err
	}
	if c.k3sKeys != nil {
		if k3sSaid.IsZero() {
			// etcd-adapter saw it before EtcdIsVoter changed (for example a stale heartbeat).
			k3sSaid = start
		}
		t.k3s = k3sSaid.Sub(start)
	}
	if err := c.restartMember(ctx, node, name); err != nil {
		return timing{}, err
	}
	return t, c.waitSteady(ctx)
}

// voterConditionNotTrue reports whether the Node's EtcdIsVoter condition, which the leader's K3s
// writes for every etcd Node, says anything but True.
func (c *cluster) voterConditionNotTrue(ctx context.Context, node string) (bool, error) {
	n := &corev1.Node{}
	if err := c.wl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return false, err
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == k3ssim.EtcdIsVoterCondition {
			return cond.Status != corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

func (c *cluster) status(ctx context.Context) (*v1alpha1.ControlPlaneEtcd, error) {
	cpe := &v1alpha1.ControlPlaneEtcd{}
	return cpe, c.p.c.Get(ctx, client.ObjectKeyFromObject(c.cpe), cpe)
}

func isTrue(cpe *v1alpha1.ControlPlaneEtcd, t string) bool {
	return conditions.IsTrue(cpe, t)
}
