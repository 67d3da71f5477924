package metrics

import (
	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// RemovalEnded returns the removal that ended between two versions of a ControlPlaneEtcd's
// status, or nil: a removal counts once, when its end time first appears. It is what
// RemovalRecorder records.
func RemovalEnded(before, after *v1alpha1.ControlPlaneEtcd) *v1alpha1.MemberRemovalStatus {
	if after == nil || after.Status.Removal == nil || after.Status.Removal.EndTime == nil {
		return nil
	}
	now := after.Status.Removal
	if before != nil && before.Status.Removal != nil {
		was := before.Status.Removal
		if was.Member == now.Member && was.MemberID == now.MemberID && was.MachineName == now.MachineName && was.StartTime.Equal(&now.StartTime) && was.EndTime != nil {
			return nil
		}
	}
	return now
}

// RecordRemovalEnded records the removal that ended between before and after, if any.
func RecordRemovalEnded(before, after *v1alpha1.ControlPlaneEtcd) {
	r := RemovalEnded(before, after)
	if r == nil {
		return
	}
	RecordRemoval(string(after.Spec.Backend), string(r.Result), r.EndTime.Sub(r.StartTime.Time))
	clusterRemovals.WithLabelValues(after.Namespace, after.Spec.ClusterName, string(r.Result)).Inc()
}
