package creation

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// ControlPlaneEtcdOf returns the ControlPlaneEtcd that names the Cluster in spec.clusterName, or
// nil when there is none. It matches by spec.clusterName, not by name: a person may create one
// for a Cluster under any name.
func ControlPlaneEtcdOf(ctx context.Context, c client.Reader, cluster *clusterv1.Cluster) (*v1alpha1.ControlPlaneEtcd, error) {
	list := &v1alpha1.ControlPlaneEtcdList{}
	if err := c.List(ctx, list, client.InNamespace(cluster.Namespace)); err != nil {
		return nil, fmt.Errorf("failed to list the ControlPlaneEtcds of Cluster %s: %w", klog.KObj(cluster), err)
	}
	for i := range list.Items {
		if list.Items[i].Spec.ClusterName == cluster.Name {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}
