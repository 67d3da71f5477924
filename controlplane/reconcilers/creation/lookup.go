package creation

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// IndexByClusterName adds the v1alpha1.ClusterNameField index to the manager's cache, which
// ControlPlaneEtcdOf needs. setup.Setup adds it; a manager that wires the controllers or the
// webhooks one by one calls it once, before the manager starts.
func IndexByClusterName(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, ClusterNameOf); err != nil {
		return fmt.Errorf("failed to index ControlPlaneEtcds by %s: %w", v1alpha1.ClusterNameField, err)
	}
	return nil
}

// ClusterNameOf is the index function of v1alpha1.ClusterNameField.
func ClusterNameOf(o client.Object) []string {
	cpe, ok := o.(*v1alpha1.ControlPlaneEtcd)
	if !ok || cpe.Spec.ClusterName == "" {
		return nil
	}
	return []string{cpe.Spec.ClusterName}
}

// ControlPlaneEtcdOf returns the ControlPlaneEtcd in charge of the Cluster, or nil when none
// names it. It matches by spec.clusterName, not by name: a person may create one for a Cluster
// under any name. When several name the same Cluster the oldest is in charge (OlderThan); the
// others are duplicates that do nothing, so one Cluster never has two removal flows.
//
// c is a cached client whose cache has the IndexByClusterName index; LiveControlPlaneEtcdOf
// reads uncached.
func ControlPlaneEtcdOf(ctx context.Context, c client.Reader, cluster *clusterv1.Cluster) (*v1alpha1.ControlPlaneEtcd, error) {
	return inChargeOf(ctx, c, cluster, client.MatchingFields{v1alpha1.ClusterNameField: cluster.Name})
}

// LiveControlPlaneEtcdOf is ControlPlaneEtcdOf for an uncached reader (the manager's API
// reader): it lists the namespace, because an apiserver filters custom resources by a spec field
// only when the CRD declares it selectable, which Kubernetes supports from v1.32 only. It is for
// the rare reads right before a hook is taken or added, not for every pass.
func LiveControlPlaneEtcdOf(ctx context.Context, r client.Reader, cluster *clusterv1.Cluster) (*v1alpha1.ControlPlaneEtcd, error) {
	return inChargeOf(ctx, r, cluster)
}

func inChargeOf(ctx context.Context, r client.Reader, cluster *clusterv1.Cluster, opts ...client.ListOption) (*v1alpha1.ControlPlaneEtcd, error) {
	list := &v1alpha1.ControlPlaneEtcdList{}
	if err := r.List(ctx, list, append([]client.ListOption{client.InNamespace(cluster.Namespace)}, opts...)...); err != nil {
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
