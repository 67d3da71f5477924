package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Namespace prefixes every metric name.
const Namespace = "etcdadapter"

// Results of RecordObservation.
const (
	// ResultSuccess labels an observation that returned a snapshot.
	ResultSuccess = "success"
	// ResultError labels an observation that failed (unreachable, timed out).
	ResultError = "error"
)

var (
	// observationDuration is the time one etcd observation of one Cluster took.
	observationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "observation_duration_seconds",
		Help:      "Time one observation of a Cluster's etcd took, by backend and result.",
		// From a K3s observation served by the informer (milliseconds) to a kubeadm one that
		// dials three members through port-forwards (seconds) and the 10 s call timeout.
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15},
	}, []string{"backend", "result"})

	// removalDuration is the time one member removal took from its start to its end.
	removalDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "member_removal_duration_seconds",
		Help:      "Time from a member removal's start to its end (Removed, Rejected, TimedOut or Released), by backend and result.",
		// Sub-second on a K3s version that reports at once, 15 s steps on older K3s ticks, and
		// the 10 min default removal limit.
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200},
	}, []string{"backend", "result"})

	// removals counts member removals that ended, by result.
	removals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "member_removals_total",
		Help:      "Member removals that ended, by backend and result.",
	}, []string{"backend", "result"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(registered...)
}

// RecordObservation records one observation of a Cluster's etcd: backend is the
// ControlPlaneEtcd's spec.backend, err the observation's error.
func RecordObservation(backend string, d time.Duration, err error) {
	result := ResultSuccess
	if err != nil {
		result = ResultError
	}
	observationDuration.WithLabelValues(backend, result).Observe(d.Seconds())
}

// RecordRemoval records one member removal that ended with result (a v1alpha1.RemovalResult).
func RecordRemoval(backend, result string, d time.Duration) {
	removalDuration.WithLabelValues(backend, result).Observe(d.Seconds())
	removals.WithLabelValues(backend, result).Inc()
}
