package creation

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// ControlPlaneEtcdOf returns the ControlPlaneEtcd in charge of the Cluster, or nil when none
// names it. It matches by spec.clusterName, not by name: a person may create one for a Cluster
// under any name. When several name the same Cluster the oldest is in charge (OlderThan); the
// others are duplicates that do nothing, so one Cluster never has two removal flows.
func ControlPlaneEtcdOf(ctx context.Context, c client.Reader, cluster *clusterv1.Cluster) (*v1alpha1.ControlPlaneEtcd, error) {
	list := &v1alpha1.ControlPlaneEtcdList{}
	if err := c.List(ctx, list, client.InNamespace(cluster.Namespace)); err != nil {
		return nil, fmt.Errorf("failed to list the ControlPlaneEtcds of Cluster %s: %w", klog.KObj(cluster), err)
	}
	var inCharge *v1alpha1.ControlPlaneEtcd
	for i := range list.Items {
		if cpe := &list.Items[i]; cpe.Spec.ClusterName == cluster.Name && (inCharge == nil || OlderThan(cpe, inCharge)) {
			inCharge = cpe
		}
	}
	return inCharge, nil
}

// OlderThan orders ControlPlaneEtcds by creation timestamp, then by name, so every reader picks
// the same one in charge of a Cluster.
func OlderThan(a, b *v1alpha1.ControlPlaneEtcd) bool {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c < 0
	}
	return a.Name < b.Name
}
