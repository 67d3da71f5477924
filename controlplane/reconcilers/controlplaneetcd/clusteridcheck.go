package controlplaneetcd

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// clusterIDInput is what the cluster ID check decides on, each ID in hexadecimal.
type clusterIDInput struct {
	// Recorded is the cluster ID recorded when first observed (status.clusterID); "" before.
	Recorded string
	// Observed is the cluster ID the members answer with now; "" when none was observed.
	Observed string
	// Accepted is the value of v1alpha1.AcceptClusterIDAnnotation; "" when absent.
	Accepted string
	// Object names the ControlPlaneEtcd in the messages.
	Object string
}

// clusterIDVerdict is the cluster ID check's answer.
type clusterIDVerdict struct {
	// Record is the cluster ID to keep in status.clusterID.
	Record string
	// Refuse is true when the etcd answering is not the one recorded: no member may be removed,
	// no ghost cleaned up and no leadership moved.
	Refuse bool
	// Accepted is true when a person's annotation accepted Observed as the new cluster ID.
	Accepted bool
	// Condition is the ClusterIDMatched condition.
	Condition metav1.Condition
}

// checkClusterID decides whether the etcd answering is the one whose cluster ID was recorded
// first. An etcd cluster keeps the ID it was bootstrapped with for its life (etcd
// server/etcdserver/api/membership/cluster.go genID), so another ID means other etcd: restored
// from a backup, rebuilt, or another Cluster's reached through endpoints that changed, with a
// client certificate its CA also signed. Nothing says which; a person who checked accepts it.
func checkClusterID(in clusterIDInput) clusterIDVerdict {
	recorded, observed, accepted := normalID(in.Recorded), normalID(in.Observed), normalID(in.Accepted)
	cond := func(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ClusterIDMatchedCondition, Status: status, Reason: reason, Message: msg}
	}
	switch {
	case observed == "":
		return clusterIDVerdict{Record: recorded, Condition: cond(metav1.ConditionUnknown, v1alpha1.ClusterIDNotObservedReason,
			"No etcd cluster ID was observed: etcd could not be observed, or the backend sees none (K3s and RKE2 Nodes publish none)")}
	case recorded == "":
		return clusterIDVerdict{Record: observed, Condition: cond(metav1.ConditionTrue, v1alpha1.ClusterIDRecordedReason,
			fmt.Sprintf("etcd cluster ID %s observed for the first time and recorded in status.clusterID", observed))}
	case observed == recorded:
		return clusterIDVerdict{Record: recorded, Condition: cond(metav1.ConditionTrue, v1alpha1.ClusterIDMatchedReason,
			fmt.Sprintf("etcd answers with cluster ID %s, as recorded", recorded))}
	case accepted == observed:
		return clusterIDVerdict{Record: observed, Accepted: true, Condition: cond(metav1.ConditionTrue, v1alpha1.ClusterIDAcceptedReason,
			fmt.Sprintf("etcd cluster ID %s accepted by annotation %s in place of %s", observed, v1alpha1.AcceptClusterIDAnnotation, recorded))}
	}
	return clusterIDVerdict{Record: recorded, Refuse: true, Condition: cond(metav1.ConditionFalse, v1alpha1.ClusterIDChangedReason, fmt.Sprintf(
		"etcd answers with cluster ID %s, not %s recorded in status.clusterID: it is other etcd than the one first observed (restored from a backup, rebuilt, or another Cluster's sharing its CA). "+
			"No member is removed, no ghost member cleaned up and no leadership moved. Once you checked that it is this Cluster's etcd, annotate %s %s=%s",
		observed, recorded, in.Object, v1alpha1.AcceptClusterIDAnnotation, observed))}
}

// normalID is a cluster ID in hexadecimal as status writes it: lower case, no 0x, no leading
// zeros, so that a person may copy it from etcdctl (%x) or from status alike.
func normalID(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	id = strings.TrimPrefix(id, "0x")
	if trimmed := strings.TrimLeft(id, "0"); trimmed != "" || id == "" {
		return trimmed
	}
	return "0"
}
