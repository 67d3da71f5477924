package metrics

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// snapshotOf builds a kubeadm-like snapshot of members a (ID 1), b (2), c (3) with a leading,
// each answering Status with applied index 100, 90 and 120.
func snapshotOf(names ...string) *etcd.Snapshot {
	s := &etcd.Snapshot{Backend: "kubeadm", ObservedAt: now, LeaderID: 1}
	applied := map[string]uint64{"a": 100, "b": 90, "c": 120}
	for i, n := range names {
		id := uint64(i + 1)
		s.Members = append(s.Members, etcd.Member{ID: id, Name: n})
		s.Evidence = append(s.Evidence, etcd.MemberEvidence{MemberID: id, Contact: etcd.ContactAnswered, ObservedAt: now,
			Status: &etcd.MemberStatus{DBSize: 4096 * int64(id), DBSizeInUse: 2048, RaftTerm: 7, RaftAppliedIndex: applied[n]}})
	}
	return s
}

// gather returns c's samples for the Cluster ns/cluster as "labels value", without the
// namespace and cluster labels.
func gather(t *testing.T, c prometheus.Collector, ns, cluster string) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	NewWithT(t).Expect(reg.Register(c)).To(Succeed())
	fams, err := reg.Gather()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			var parts []string
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
				if l.GetName() != "namespace" && l.GetName() != "cluster" {
					parts = append(parts, l.GetName()+"="+l.GetValue())
				}
			}
			if labels["namespace"] != ns || labels["cluster"] != cluster {
				continue
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out = append(out, strings.Join(parts, ",")+" "+strconv.FormatFloat(v, 'f', -1, 64))
		}
	}
	return out
}

func TestRecordSnapshot(t *testing.T) {
	g := NewWithT(t)
	ns, cluster := "ns-rs", "c-rs"
	t.Cleanup(func() { ForgetCluster(ns, cluster) })

	RecordSnapshot(ns, cluster, snapshotOf("a", "b", "c"))
	g.Expect(gather(t, memberAppliedIndexLag, ns, cluster)).To(ConsistOf("member=a 0", "member=b 10", "member=c 0"),
		"the leader lags by 0; a follower ahead of the leader's answer by 0, not a negative lag")
	g.Expect(gather(t, memberIsLeader, ns, cluster)).To(ConsistOf("member=a 1", "member=b 0", "member=c 0"))
	g.Expect(gather(t, memberDBSize, ns, cluster)).To(ConsistOf("member=a 4096", "member=b 8192", "member=c 12288"))
	g.Expect(gather(t, memberDBSizeQuota, ns, cluster)).To(BeEmpty(), "etcd before v3.6 reports no quota: no series, not 0")
	g.Expect(gather(t, memberAlarm, ns, cluster)).To(HaveLen(6), "NOSPACE and CORRUPT per member")
	g.Expect(gather(t, leaderChanges, ns, cluster)).To(ConsistOf(" 0"))

	// c is removed, b leads, and a NOSPACE alarm names b; a failed observation in between
	// changes nothing.
	RecordSnapshot(ns, cluster, nil)
	next := snapshotOf("a", "b")
	next.LeaderID = 2
	next.Alarms = []etcd.ActiveAlarm{{MemberID: 2, Alarm: etcd.AlarmNoSpace}}
	next.Evidence[1].Status.DBSizeQuota = 2 << 30
	RecordSnapshot(ns, cluster, next)
	g.Expect(gather(t, memberIsLeader, ns, cluster)).To(ConsistOf("member=a 0", "member=b 1"))
	g.Expect(gather(t, memberDBSize, ns, cluster)).To(ConsistOf("member=a 4096", "member=b 8192"), "the removed member's series are deleted")
	g.Expect(gather(t, memberLastObserved, ns, cluster)).To(HaveLen(2))
	g.Expect(gather(t, memberAlarm, ns, cluster)).To(ConsistOf(
		"alarm=NOSPACE,member=a 0", "alarm=CORRUPT,member=a 0", "alarm=NOSPACE,member=b 1", "alarm=CORRUPT,member=b 0"))
	g.Expect(gather(t, memberDBSizeQuota, ns, cluster)).To(ConsistOf("member=b 2147483648"))
	g.Expect(gather(t, leaderChanges, ns, cluster)).To(ConsistOf(" 1"))

	ForgetCluster(ns, cluster)
	for _, c := range []prometheus.Collector{memberDBSize, memberDBSizeInUse, memberDBSizeQuota, memberIsLeader, memberRaftTerm,
		memberAppliedIndexLag, memberAlarm, memberLastObserved, leaderChanges, clusterRemovals} {
		g.Expect(gather(t, c, ns, cluster)).To(BeEmpty(), "a forgotten Cluster keeps no series")
	}
}

// TestRecordSnapshotK3s: a backend blind to the leader and alarms, with no Status, exports only
// the evidence's age, never a guessed leader or a 0 that reads as "no alarm".
func TestRecordSnapshotK3s(t *testing.T) {
	g := NewWithT(t)
	ns, cluster := "ns-k3s", "c-k3s"
	t.Cleanup(func() { ForgetCluster(ns, cluster) })
	s := snapshotOf("a", "b", "c")
	s.Backend, s.LeaderID, s.BlindSpots = "k3s", 0, []etcd.BlindSpot{etcd.BlindSpotLeader, etcd.BlindSpotAlarms}
	for i := range s.Evidence {
		s.Evidence[i].Status = nil
	}
	s.Evidence[2].Contact = etcd.ContactUnknown
	RecordSnapshot(ns, cluster, s)
	g.Expect(gather(t, memberLastObserved, ns, cluster)).To(HaveLen(2), "c's evidence is not trusted, so it has no age")
	for _, c := range []prometheus.Collector{memberDBSize, memberIsLeader, memberRaftTerm, memberAppliedIndexLag, memberAlarm, leaderChanges} {
		g.Expect(gather(t, c, ns, cluster)).To(BeEmpty())
	}
}

func TestClusterRemovalsForgotten(t *testing.T) {
	g := NewWithT(t)
	clusterRemovals.WithLabelValues("ns-rm", "c-rm", "Removed").Inc()
	g.Expect(testutil.ToFloat64(clusterRemovals.WithLabelValues("ns-rm", "c-rm", "Removed"))).To(Equal(1.0))
	ForgetCluster("ns-rm", "c-rm")
	g.Expect(gather(t, clusterRemovals, "ns-rm", "c-rm")).To(BeEmpty())
}

// TestSeriesNames: the names come from the registered collectors, histograms as Prometheus
// stores them, and every one is in controller-runtime's registry once recorded.
func TestSeriesNames(t *testing.T) {
	g := NewWithT(t)
	names := SeriesNames()
	g.Expect(names).To(ContainElements("etcdadapter_member_db_size_bytes", "etcdadapter_hooks_blocking",
		"etcdadapter_observation_duration_seconds_bucket", "etcdadapter_cluster_member_removals_total", "etcdadapter_leader_changes_total"))
	g.Expect(names).NotTo(ContainElement("etcdadapter_observation_duration_seconds"))
	for _, c := range registered {
		var already prometheus.AlreadyRegisteredError
		g.Expect(errors.As(ctrlmetrics.Registry.Register(c), &already)).To(BeTrue(),
			"every collector SeriesNames reads is registered in the manager's registry")
	}
}

// TestForgetDeleted: a deleted ControlPlaneEtcd, seen as such or as the informer's tombstone,
// takes its Cluster's series with it (the Cluster is named by spec.clusterName, as the series).
func TestForgetDeleted(t *testing.T) {
	for name, wrap := range map[string]func(*v1alpha1.ControlPlaneEtcd) any{
		"deleted": func(c *v1alpha1.ControlPlaneEtcd) any { return c },
		"tombstone": func(c *v1alpha1.ControlPlaneEtcd) any {
			return toolscache.DeletedFinalStateUnknown{Key: "ns-fd/x", Obj: c}
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			RecordSnapshot("ns-fd", "c-fd", snapshotOf("a", "b"))
			g.Expect(gather(t, memberDBSize, "ns-fd", "c-fd")).To(HaveLen(2))
			forgetDeleted(wrap(&v1alpha1.ControlPlaneEtcd{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns-fd", Name: "x"},
				Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c-fd"},
			}))
			g.Expect(gather(t, memberDBSize, "ns-fd", "c-fd")).To(BeEmpty())
			g.Expect(gather(t, leaderChanges, "ns-fd", "c-fd")).To(BeEmpty())
		})
	}
}
