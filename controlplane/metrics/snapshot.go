package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// snapshotAgeDesc is the age of a Cluster's newest verified snapshot (spec.snapshot).
var snapshotAgeDesc = prometheus.NewDesc(Namespace+"_snapshot_age_seconds",
	"Seconds since the newest verified etcd snapshot of a Cluster was taken (status.snapshot.last); absent before the first one, or without spec.snapshot.",
	[]string{"namespace", "cluster", "backend"}, nil)

// collectSnapshotAge sends the age of cpe's newest verified snapshot, if any.
func collectSnapshotAge(ch chan<- prometheus.Metric, cpe *v1alpha1.ControlPlaneEtcd, now time.Time) {
	if cpe.Status.Snapshot == nil || cpe.Status.Snapshot.Last == nil {
		return
	}
	age := now.Sub(cpe.Status.Snapshot.Last.Time.Time).Seconds()
	ch <- prometheus.MustNewConstMetric(snapshotAgeDesc, prometheus.GaugeValue, age, cpe.Namespace, cpe.Spec.ClusterName, string(cpe.Spec.Backend))
}
