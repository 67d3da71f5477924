package metrics

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
)

// collectTimeout bounds the reads of one scrape; they are served by the manager's cache.
const collectTimeout = 5 * time.Second

var (
	membersDesc = prometheus.NewDesc(Namespace+"_members",
		"etcd members of a Cluster as its ControlPlaneEtcd status reports them, by role (Leader, Voter, Learner) and health (Healthy, Unhealthy, Unknown).",
		[]string{"namespace", "cluster", "backend", "role", "health"}, nil)
	faultToleranceDesc = prometheus.NewDesc(Namespace+"_fault_tolerance",
		"How many more voting members of a Cluster may fail before etcd loses quorum (status.faultTolerance); absent before the first observation.",
		[]string{"namespace", "cluster", "backend"}, nil)
	availableDesc = prometheus.NewDesc(Namespace+"_available",
		"1 when the ControlPlaneEtcd's Available condition is True, 0 when False, -1 when Unknown or missing.",
		[]string{"namespace", "cluster", "backend", "reason"}, nil)
	hooksWaitingDesc = prometheus.NewDesc(Namespace+"_hooks_waiting",
		"Deleting control-plane and etcdadm etcd Machines of a Cluster still held by the etcd-adapter pre-terminate hook (or the adopted cluster-api-k3s hook).",
		[]string{"namespace", "cluster"}, nil)
	hooksBlockingDesc = prometheus.NewDesc(Namespace+"_hooks_blocking",
		"Of hooks_waiting, the Machines whose deletion waits on pre-terminate hooks alone (Cluster API's Deleting condition reason WaitingForPreTerminateHook): drain and volume detach are done, so the hook, not a PodDisruptionBudget, holds them.",
		[]string{"namespace", "cluster"}, nil)
	collectErrorsDesc = prometheus.NewDesc(Namespace+"_status_collect_errors",
		"1 when the last scrape could not list ControlPlaneEtcds or Machines.",
		nil, nil)
)

// StatusCollector exports gauges read at scrape time from ControlPlaneEtcds and control-plane
// Machines. Reader should be the manager's cached client, so a scrape costs no apiserver call.
type StatusCollector struct {
	Reader client.Reader
}

var _ prometheus.Collector = &StatusCollector{}

// Describe sends the descriptors of every metric the collector exports.
func (c *StatusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{membersDesc, faultToleranceDesc, availableDesc, hooksWaitingDesc, hooksBlockingDesc, collectErrorsDesc, snapshotAgeDesc, machineMemberConditionDesc} {
		ch <- d
	}
}

// Collect reads the objects and sends the gauges.
func (c *StatusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	failed := 0.0
	cpes := &v1alpha1.ControlPlaneEtcdList{}
	// Read only: the cache's own objects, not a copy of every ControlPlaneEtcd per scrape.
	if err := c.Reader.List(ctx, cpes, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.Log.WithName("metrics").V(4).Info("Failed to list ControlPlaneEtcds", "err", err.Error())
		failed = 1
	}
	for i := range cpes.Items {
		collectControlPlaneEtcd(ch, &cpes.Items[i])
		collectSnapshotAge(ch, &cpes.Items[i], time.Now())
	}
	// One read of every Machine, filtered by HooksWaiting: a label selector cannot say "either
	// label", and the cache scans every Machine for a selector anyway.
	machines := &clusterv1.MachineList{}
	if err := c.Reader.List(ctx, machines, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.Log.WithName("metrics").V(4).Info("Failed to list Machines", "err", err.Error())
		failed = 1
	} else {
		// Not on a failed read: a count of 0 Machines would be a false answer, not a missing one.
		collectMemberConditions(ch, cpes.Items, machines.Items)
	}
	for key, n := range HooksWaiting(machines.Items) {
		ch <- prometheus.MustNewConstMetric(hooksWaitingDesc, prometheus.GaugeValue, float64(n), key.Namespace, key.Name)
	}
	for key, n := range HooksBlocking(machines.Items) {
		ch <- prometheus.MustNewConstMetric(hooksBlockingDesc, prometheus.GaugeValue, float64(n), key.Namespace, key.Name)
	}
	ch <- prometheus.MustNewConstMetric(collectErrorsDesc, prometheus.GaugeValue, failed)
}

func collectControlPlaneEtcd(ch chan<- prometheus.Metric, cpe *v1alpha1.ControlPlaneEtcd) {
	ns, cluster, backend := cpe.Namespace, cpe.Spec.ClusterName, string(cpe.Spec.Backend)
	type roleHealth struct{ role, health string }
	counts := map[roleHealth]int{}
	for _, m := range cpe.Status.Members {
		counts[roleHealth{string(m.Role), string(m.Health)}]++
	}
	for rh, n := range counts {
		ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(n), ns, cluster, backend, rh.role, rh.health)
	}
	if ft := cpe.Status.FaultTolerance; ft != nil {
		ch <- prometheus.MustNewConstMetric(faultToleranceDesc, prometheus.GaugeValue, float64(*ft), ns, cluster, backend)
	}
	value, reason := -1.0, ""
	if c := conditions.Get(cpe, v1alpha1.AvailableCondition); c != nil {
		reason = c.Reason
		switch c.Status {
		case "True":
			value = 1
		case "False":
			value = 0
		}
	}
	ch <- prometheus.MustNewConstMetric(availableDesc, prometheus.GaugeValue, value, ns, cluster, backend, reason)
}

// HooksWaiting counts, per Cluster, the deleting control-plane and etcdadm etcd Machines held by
// the etcd-adapter hook or the legacy cluster-api-k3s hook, whatever step their deletion is at.
func HooksWaiting(machines []clusterv1.Machine) map[client.ObjectKey]int {
	return countHeld(machines, func(*clusterv1.Machine) bool { return true })
}

// HooksBlocking counts, per Cluster, the Machines of HooksWaiting whose deletion Cluster API's
// Machine controller reports waiting on pre-terminate hooks (Deleting condition reason
// WaitingForPreTerminateHook): a Machine still draining (a PodDisruptionBudget may hold it for
// hours) is waiting, not blocked by the hook.
func HooksBlocking(machines []clusterv1.Machine) map[client.ObjectKey]int {
	return countHeld(machines, func(m *clusterv1.Machine) bool {
		c := conditions.Get(m, clusterv1.MachineDeletingCondition)
		return c != nil && c.Reason == clusterv1.MachineDeletingWaitingForPreTerminateHookReason
	})
}

func countHeld(machines []clusterv1.Machine, at func(*clusterv1.Machine) bool) map[client.ObjectKey]int {
	out := map[client.ObjectKey]int{}
	for i := range machines {
		m := &machines[i]
		if m.DeletionTimestamp.IsZero() || !backends.IsControlPlaneOrEtcdMachine(m.Labels) || !heldByHook(m) || !at(m) {
			continue
		}
		out[client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}]++
	}
	return out
}

func heldByHook(m *clusterv1.Machine) bool {
	for k, v := range m.Annotations {
		if k == v1alpha1.PreTerminateHookAnnotation || (k == v1alpha1.LegacyK3sHookAnnotation && strings.EqualFold(v, v1alpha1.LegacyK3sHookValue)) {
			return true
		}
	}
	return false
}
