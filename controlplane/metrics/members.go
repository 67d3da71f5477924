package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Per-member series carry these labels only: a Cluster has a handful of members, so a fleet of
// N Clusters has about 3N series per metric (etcd member names, never keys or IDs).
var (
	clusterLabels = []string{"namespace", "cluster"}
	memberLabels  = []string{"namespace", "cluster", "member"}
)

// exportedAlarms are the alarm types etcd raises (etcdserverpb.AlarmType); the alarm label takes
// no other value, so it adds two series per member.
var exportedAlarms = []etcd.Alarm{etcd.AlarmNoSpace, etcd.AlarmCorrupt}

var (
	memberDBSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "member_db_size_bytes",
		Help: "Size of the member's backend database file, from its last answered etcd Status (kubeadm and external backends).",
	}, memberLabels)
	memberDBSizeInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "member_db_size_in_use_bytes",
		Help: "Part of the member's database that holds data (the rest a defragment gives back), from its last answered etcd Status (kubeadm and external backends).",
	}, memberLabels)
	memberDBSizeQuota = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "member_db_size_quota_bytes",
		Help: "The member's backend quota (--quota-backend-bytes), from its last answered etcd Status; absent for etcd before v3.6, which does not report it.",
	}, memberLabels)
	memberIsLeader = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "member_is_leader",
		Help: "1 when the last observation named the member leader, else 0 (kubeadm and external backends; K3s cannot tell).",
	}, memberLabels)
	memberRaftTerm = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "member_raft_term",
		Help: "The member's raft term from its last answered etcd Status (kubeadm and external backends).",
	}, memberLabels)
	memberAppliedIndexLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "member_applied_index_lag",
		Help: "Raft entries the leader had applied and the member had not, from one observation's Status answers (kubeadm and external backends); 0 for the leader.",
	}, memberLabels)
	memberAlarm = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "member_alarm",
		Help: "1 when the etcd alarm (NOSPACE, CORRUPT) is active on the member, else 0 (kubeadm and external backends; K3s cannot see alarms).",
	}, append(memberLabels[:len(memberLabels):len(memberLabels)], "alarm"))
	memberLastObserved = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "member_last_observed_timestamp_seconds",
		Help: "Unix time of the newest evidence from the member itself (its answer; for K3s the heartbeat of its Node's etcd condition); time() minus it is the evidence's age.",
	}, memberLabels)
	leaderChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "leader_changes_total",
		Help: "Changes of a Cluster's etcd leader this manager saw between two observations (kubeadm and external backends).",
	}, clusterLabels)
	clusterRemovals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "cluster_member_removals_total",
		Help: "Member removals of a Cluster that ended, by result (Removed, Rejected, TimedOut, Released).",
	}, append(clusterLabels[:len(clusterLabels):len(clusterLabels)], "result"))
)

// memberVecs are every per-member vector, for deleting a member's series.
var memberVecs = []*prometheus.GaugeVec{memberDBSize, memberDBSizeInUse, memberDBSizeQuota, memberIsLeader, memberRaftTerm, memberAppliedIndexLag, memberLastObserved}

// clusterKey names a Cluster in the series' labels.
type clusterKey struct{ namespace, cluster string }

// seen is what the per-member series were last set from, per Cluster: the members with series
// and the leader, so a member that left loses its series and a new leader counts as a change.
var seen = struct {
	sync.Mutex
	members map[clusterKey]map[string]bool
	leader  map[clusterKey]string
}{members: map[clusterKey]map[string]bool{}, leader: map[clusterKey]string{}}

// RecordSnapshot sets the per-member series of the Cluster namespace/cluster from one
// observation, deletes those of members no longer in it, and counts a leader change. A nil
// snapshot (a failed observation) changes nothing: the series keep their values and the
// last-observed timestamps age.
func RecordSnapshot(namespace, cluster string, snap *etcd.Snapshot) {
	if snap == nil {
		return
	}
	key := clusterKey{namespace, cluster}
	seen.Lock()
	defer seen.Unlock()
	now := map[string]bool{}
	for _, m := range snap.Members {
		if m.Name != "" {
			now[m.Name] = true
			recordMember(key, snap, m)
		}
	}
	for name := range seen.members[key] {
		if !now[name] {
			deleteMember(key, name)
		}
	}
	seen.members[key] = now
	recordLeader(key, snap)
}

func recordMember(key clusterKey, snap *etcd.Snapshot, m etcd.Member) {
	l := prometheus.Labels{"namespace": key.namespace, "cluster": key.cluster, "member": m.Name}
	if !snap.Blind(etcd.BlindSpotLeader) {
		memberIsLeader.With(l).Set(boolValue(snap.LeaderID != 0 && snap.LeaderID == m.ID))
	}
	if !snap.Blind(etcd.BlindSpotAlarms) {
		for _, a := range exportedAlarms {
			memberAlarm.WithLabelValues(key.namespace, key.cluster, m.Name, string(a)).Set(boolValue(hasAlarm(snap, m.ID, a)))
		}
	}
	ev, ok := evidenceOf(snap, m.ID)
	if !ok || ev.Contact != etcd.ContactAnswered {
		return
	}
	if !ev.ObservedAt.IsZero() {
		memberLastObserved.With(l).Set(float64(ev.ObservedAt.UnixNano()) / 1e9)
	}
	st := ev.Status
	if st == nil {
		return
	}
	memberDBSize.With(l).Set(float64(st.DBSize))
	memberDBSizeInUse.With(l).Set(float64(st.DBSizeInUse))
	if st.DBSizeQuota > 0 {
		memberDBSizeQuota.With(l).Set(float64(st.DBSizeQuota))
	}
	memberRaftTerm.With(l).Set(float64(st.RaftTerm))
	if lead, ok := evidenceOf(snap, snap.LeaderID); ok && snap.LeaderID != 0 && lead.Status != nil {
		// Members answer moments apart, so a follower may be ahead of the leader's answer.
		memberAppliedIndexLag.With(l).Set(float64(lead.Status.RaftAppliedIndex - min(lead.Status.RaftAppliedIndex, st.RaftAppliedIndex)))
	}
}

// recordLeader counts a change of leader: a named leader other than the last one named. A
// leaderless observation in between is not a change of its own.
func recordLeader(key clusterKey, snap *etcd.Snapshot) {
	if snap.Blind(etcd.BlindSpotLeader) || snap.LeaderID == 0 {
		return
	}
	m, ok := snap.MemberByID(snap.LeaderID)
	if !ok || m.Name == "" {
		return
	}
	if last, known := seen.leader[key]; known && last != m.Name {
		leaderChanges.WithLabelValues(key.namespace, key.cluster).Inc()
	} else if !known {
		// The Cluster's series start at zero, so rate() and increase() see the first change.
		leaderChanges.WithLabelValues(key.namespace, key.cluster).Add(0)
	}
	seen.leader[key] = m.Name
}

func deleteMember(key clusterKey, name string) {
	l := prometheus.Labels{"namespace": key.namespace, "cluster": key.cluster, "member": name}
	for _, v := range memberVecs {
		v.Delete(l)
	}
	memberAlarm.DeletePartialMatch(l)
}

// ForgetCluster deletes every series of the Cluster namespace/cluster, per member and per
// Cluster: it is called when the Cluster's ControlPlaneEtcd is gone (opt-out, hand-back, Cluster
// deleted, uninstall).
func ForgetCluster(namespace, cluster string) {
	key := clusterKey{namespace, cluster}
	seen.Lock()
	defer seen.Unlock()
	delete(seen.members, key)
	delete(seen.leader, key)
	l := prometheus.Labels{"namespace": namespace, "cluster": cluster}
	for _, v := range memberVecs {
		v.DeletePartialMatch(l)
	}
	memberAlarm.DeletePartialMatch(l)
	leaderChanges.DeletePartialMatch(l)
	clusterRemovals.DeletePartialMatch(l)
}

func evidenceOf(snap *etcd.Snapshot, id uint64) (etcd.MemberEvidence, bool) {
	for _, ev := range snap.Evidence {
		if ev.MemberID == id {
			return ev, true
		}
	}
	return etcd.MemberEvidence{}, false
}

func hasAlarm(snap *etcd.Snapshot, id uint64, a etcd.Alarm) bool {
	for _, al := range snap.Alarms {
		if al.MemberID == id && al.Alarm == a {
			return true
		}
	}
	return false
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
