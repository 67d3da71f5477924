package backends

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// GetControlPlane reads the Cluster's control-plane object (spec.controlPlaneRef) into obj, an
// *unstructured.Unstructured or, when only its metadata is needed, a *metav1.PartialObjectMetadata
// (a cached client then keeps a metadata informer for the kind, not whole objects). It reads the
// version mapper prefers, so any version of the kind serves. It reports false and no error when
// the Cluster references none, when the kind is not one the manager reads (ControlPlaneKinds) or
// not installed, or when the object does not exist (yet).
//
// Note: the manager's role allows list and watch on ControlPlaneKinds only; a cached read of any
// other kind would wait for an informer that never syncs.
func GetControlPlane(ctx context.Context, c client.Reader, mapper meta.RESTMapper, cluster *clusterv1.Cluster, obj client.Object) (bool, error) {
	ref := cluster.Spec.ControlPlaneRef
	if !ref.IsDefined() || !ReadsControlPlaneKind(ref.GroupKind()) {
		return false, nil
	}
	mapping, err := mapper.RESTMapping(ref.GroupKind())
	if err != nil {
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		return false, fmt.Errorf("failed to map control-plane kind %s: %w", ref.GroupKind(), err)
	}
	obj.GetObjectKind().SetGroupVersionKind(mapping.GroupVersionKind)
	if err := c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return false, nil
		}
		return false, fmt.Errorf("failed to get %s %s of Cluster %s: %w", ref.Kind, ref.Name, cluster.Name, err)
	}
	return true, nil
}

// ReadControlPlane reads the Cluster's control-plane object as unstructured (GetControlPlane). It
// returns nil and no error when there is none to read; a failed read is an error wrapping
// etcd.ErrUnreachable, for the backends that observe through it.
func ReadControlPlane(ctx context.Context, c client.Reader, mapper meta.RESTMapper, cluster *clusterv1.Cluster) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	found, err := GetControlPlane(ctx, c, mapper, cluster, obj)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", etcd.ErrUnreachable, err)
	}
	if !found {
		return nil, nil
	}
	return obj, nil
}
