package fleetbench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

// measure samples the manager's CPU over a quiet window, its RSS, heap, descriptors and
// goroutines, then how long each status takes to say that a member failed (all clusters at
// once).
func (f *fleet) measure(ctx context.Context, proc *managerProcess, window time.Duration) (fleetRow, error) {
	row := fleetRow{n: f.n, workers: f.workers}
	// Let the connections of the clusters just added settle before sampling.
	if err := sleep(ctx, settle); err != nil {
		return row, err
	}
	before, err := proc.cpuTicks()
	if err != nil {
		return row, err
	}
	// Profiles are named after the size and the worker Nodes, so a step with workers does not
	// overwrite the one without.
	name := fmt.Sprintf("%s-N%d-W%d", f.backend, f.n, f.workers)
	quiet := profileCPU(proc, name+"-quiet", window-time.Second)
	if err := sleep(ctx, window); err != nil {
		return row, err
	}
	after, err := proc.cpuTicks()
	if err != nil {
		return row, err
	}
	if err := quiet(); err != nil {
		return row, fmt.Errorf("failed to save the manager's CPU profile: %w", err)
	}
	row.cpuPerMin = float64(after-before) / clockTicks / window.Minutes()
	if row.sample, err = proc.sample(); err != nil {
		return row, err
	}
	// What the manager does while every Cluster reports the failure.
	busy := profileCPU(proc, name+"-freshness", 30*time.Second)
	managerBefore, errM := proc.cpuTicks()
	machineBusyBefore, machineTotalBefore, errB := machineCPU()
	started := time.Now()
	lat, err := f.freshness(ctx, len(f.workloads))
	managerAfter, errM2 := proc.cpuTicks()
	machineBusyAfter, machineTotalAfter, errB2 := machineCPU()
	err = errors.Join(err, busy(), errM, errB, errM2, errB2)
	if err == nil {
		row.freshManagerCores = float64(managerAfter-managerBefore) / clockTicks / time.Since(started).Seconds()
		row.freshMachineBusy = float64(machineBusyAfter-machineBusyBefore) / float64(max(1, machineTotalAfter-machineTotalBefore))
	}
	if err != nil {
		// What the manager was doing, for FLEET_PROFILES.
		return row, errors.Join(err, saveHeapProfile(proc, name+"-stuck"), f.saveMetrics(proc))
	}
	row.freshP50, row.freshMax = median(lat), slices.Max(lat)
	// The same failure on the first workload cluster alone, the fleet's other passes going on.
	if lat, err = f.freshness(ctx, 1); err != nil {
		return row, errors.Join(err, saveHeapProfile(proc, name+"-stuck-one"), f.saveMetrics(proc))
	}
	row.oneP50, row.oneMax = median(lat), slices.Max(lat)
	return row, nil
}

// freshness makes the member on Node cp-2 fail on the first `workloads` workload clusters at
// once and measures, for each of their Clusters, the time until its status no longer calls that
// member healthy; then brings the members back and waits for the whole fleet to be healthy.
func (f *fleet) freshness(ctx context.Context, workloads int) ([]time.Duration, error) {
	const node = "cp-2"
	failing := f.workloads[:workloads]
	want := min(f.n, workloads*f.share)
	var start time.Time
	trigger := func() error {
		start = time.Now()
		for _, c := range failing {
			if err := c.fail(ctx, node); err != nil {
				return fmt.Errorf("failed to make the member on Node %s fail: %w", node, err)
			}
		}
		return nil
	}
	seen, err := f.watchUntil(ctx, trigger, &start, want, func(cpe *v1alpha1.ControlPlaneEtcd) bool {
		return f.index(cpe.Name) < want && slices.ContainsFunc(cpe.Status.Members, func(m v1alpha1.EtcdMemberStatus) bool {
			return m.NodeName == node && m.Health != v1alpha1.MemberHealthy
		})
	})
	if err != nil {
		return nil, fmt.Errorf("failed waiting for %d statuses to report Node %s (%d did; not: %s; workload clusters of those not reporting: %s): %w",
			want, node, len(seen), f.describeMissing(ctx, seen, want), f.describeWorkloadsMissing(ctx, seen, want, node), err)
	}
	for _, c := range failing {
		if err := c.recover(ctx, node); err != nil {
			return nil, fmt.Errorf("failed to bring the member on Node %s back: %w", node, err)
		}
	}
	if err := f.waitObserved(ctx, healthy); err != nil {
		return nil, fmt.Errorf("failed waiting for the fleet to be healthy again: %w", err)
	}
	out := make([]time.Duration, 0, len(seen))
	for _, d := range seen {
		out = append(out, d)
	}
	return out, nil
}

// watchUntil watches the fleet's ControlPlaneEtcds, calls trigger once the watch is open, and
// records for each the time from *start to the first event that satisfies done. Events arrive
// as the API server commits them, so the figure does not depend on how fast a List answers on a
// loaded machine.
func (f *fleet) watchUntil(ctx context.Context, trigger func() error, start *time.Time, want int, done func(*v1alpha1.ControlPlaneEtcd) bool) (map[string]time.Duration, error) {
	wc, err := client.NewWithWatch(f.mgmt.Config, client.Options{Scheme: f.mgmt.Client.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("failed to create a watching client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	w, err := wc.Watch(ctx, &v1alpha1.ControlPlaneEtcdList{}, client.InNamespace(f.ns))
	if err != nil {
		return nil, fmt.Errorf("failed to watch ControlPlaneEtcds: %w", err)
	}
	defer func() { w.Stop() }()
	if err := trigger(); err != nil {
		return nil, err
	}
	seen := map[string]time.Duration{}
	see := func(cpe *v1alpha1.ControlPlaneEtcd) {
		if _, ok := seen[cpe.Name]; !ok && done(cpe) {
			seen[cpe.Name] = time.Since(*start)
		}
	}
	lastRV := ""
	for len(seen) < want {
		select {
		case <-ctx.Done():
			return seen, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The apiserver ends a watch that falls behind (thousands of status writes at
				// once); go on from the last event seen, or from a list when that is too old.
				if w, lastRV, err = f.rewatch(ctx, wc, lastRV, see); err != nil {
					return seen, err
				}
				continue
			}
			cpe, isCPE := ev.Object.(*v1alpha1.ControlPlaneEtcd)
			if !isCPE {
				continue
			}
			lastRV = cpe.ResourceVersion
			see(cpe)
		}
	}
	return seen, nil
}

// rewatch opens the ControlPlaneEtcd watch again from resourceVersion rv; when that fails it lists
// them (each listed one goes to see) and watches from the list.
func (f *fleet) rewatch(ctx context.Context, wc client.WithWatch, rv string, see func(*v1alpha1.ControlPlaneEtcd)) (watch.Interface, string, error) {
	if rv != "" {
		w, err := wc.Watch(ctx, &v1alpha1.ControlPlaneEtcdList{}, client.InNamespace(f.ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err == nil {
			return w, rv, nil
		}
	}
	list := &v1alpha1.ControlPlaneEtcdList{}
	if err := wc.List(ctx, list, client.InNamespace(f.ns)); err != nil {
		return nil, rv, fmt.Errorf("failed to list ControlPlaneEtcds after the watch ended: %w", err)
	}
	for i := range list.Items {
		see(&list.Items[i])
	}
	w, err := wc.Watch(ctx, &v1alpha1.ControlPlaneEtcdList{}, client.InNamespace(f.ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return nil, rv, fmt.Errorf("failed to watch ControlPlaneEtcds again: %w", err)
	}
	return w, list.ResourceVersion, nil
}

// describeMissing names the ControlPlaneEtcds not in seen, with their health condition, for the
// error of a freshness measure that timed out.
func (f *fleet) describeMissing(ctx context.Context, seen map[string]time.Duration, want int) string {
	list := &v1alpha1.ControlPlaneEtcdList{}
	if err := f.mgmt.Client.List(ctx, list, client.InNamespace(f.ns)); err != nil {
		return err.Error()
	}
	var out []string
	for i := range list.Items {
		cpe := &list.Items[i]
		if _, ok := seen[cpe.Name]; ok || f.index(cpe.Name) >= want || len(out) >= 10 {
			continue
		}
		why := "no condition"
		if c := meta.FindStatusCondition(cpe.Status.Conditions, v1alpha1.EtcdClusterHealthyCondition); c != nil {
			why = fmt.Sprintf("%s %s %q at %s", c.Status, c.Reason, c.Message, c.LastTransitionTime.UTC().Format(time.TimeOnly))
		}
		out = append(out, fmt.Sprintf("%s (%d members; %s)", cpe.Name, len(cpe.Status.Members), why))
	}
	return strings.Join(out, ", ")
}

// describeWorkloadsMissing says, for each workload cluster with a ControlPlaneEtcd not in seen,
// how many of its Clusters did not report and what its own apiserver says of Node node: whether
// the failure is there to see (the manager did not see it) or is not (the workload cluster lost
// it).
func (f *fleet) describeWorkloadsMissing(ctx context.Context, seen map[string]time.Duration, want int, node string) string {
	missing := map[int]int{}
	for i := range want {
		if _, ok := seen[f.name(i)]; !ok {
			missing[i/f.share]++
		}
	}
	var out []string
	for w, n := range missing {
		what := "its member is stopped"
		if f.backend != v1alpha1.BackendKubeadm {
			what = "Node not read"
			got := &corev1.Node{}
			if err := f.workloads[w].apiServer().Client.Get(ctx, client.ObjectKey{Name: node}, got); err != nil {
				what = err.Error()
			}
			var conds []string
			for _, c := range got.Status.Conditions {
				if c.Type == corev1.NodeReady || c.Type == k3s.EtcdIsVoterCondition {
					conds = append(conds, fmt.Sprintf("%s=%s %s since %s, heartbeat %s", c.Type, c.Status, c.Reason,
						c.LastTransitionTime.UTC().Format(time.TimeOnly), c.LastHeartbeatTime.UTC().Format(time.TimeOnly)))
				}
			}
			if len(conds) > 0 {
				what = fmt.Sprintf("Node %s: %s", node, strings.Join(conds, ", "))
			}
		}
		out = append(out, fmt.Sprintf("workload %d: %d Clusters (%s)", w, n, what))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}
