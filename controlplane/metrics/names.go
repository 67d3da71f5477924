package metrics

import (
	"regexp"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// registered are the collectors init registers in controller-runtime's registry.
var registered = []prometheus.Collector{
	observationDuration, removalDuration, removals,
	memberDBSize, memberDBSizeInUse, memberDBSizeQuota, memberIsLeader, memberRaftTerm,
	memberAppliedIndexLag, memberAlarm, memberLastObserved, leaderChanges, clusterRemovals,
}

// histograms are the registered collectors Prometheus stores as _bucket, _sum and _count series.
var histograms = map[prometheus.Collector]bool{observationDuration: true, removalDuration: true}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// SeriesNames returns every metric name the manager's etcd-adapter metrics put in Prometheus:
// those of the registered collectors and of StatusCollector (which the manager registers), with
// a histogram's _bucket, _sum and _count. Dashboards and alerts may name only these. It reads
// the collectors' descriptors, so a metric exists here exactly when it is registered.
func SeriesNames() []string {
	var out []string
	add := func(c prometheus.Collector) {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				continue
			}
			if histograms[c] {
				out = append(out, m[1]+"_bucket", m[1]+"_sum", m[1]+"_count")
				continue
			}
			out = append(out, m[1])
		}
	}
	for _, c := range registered {
		add(c)
	}
	add(&StatusCollector{})
	sort.Strings(out)
	return out
}
