package machinehook

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

// embedsRemoval reports whether the Cluster's control-plane object carries
// hook.EmbeddedRemovalAnnotation: its provider removes members itself. It lists the object's
// metadata by name, uncached, since the manager's role allows list and watch on the control-plane
// kinds, not get.
//
// Note: a read that fails, or a kind the manager does not read or that is not installed, counts
// as no annotation: the Machine then gets the hook as before, and the ControlPlaneEtcd controller
// takes it off once it sees the annotation. A failed read never blocks a Machine's creation.
func (w *Webhook) embedsRemoval(ctx context.Context, cluster *clusterv1.Cluster) bool {
	ref := cluster.Spec.ControlPlaneRef
	if !ref.IsDefined() || !backends.ReadsControlPlaneKind(ref.GroupKind()) || w.mapper == nil {
		return false
	}
	log := ctrl.LoggerFrom(ctx).WithValues("kind", ref.Kind, "name", ref.Name)
	mapping, err := w.mapper.RESTMapping(ref.GroupKind())
	if err != nil {
		log.V(2).Info("Could not map the control-plane kind; taking it as not embedding the member removal", "err", err)
		return false
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(ref.Kind + "List"))
	if err := w.Client.List(ctx, list, client.InNamespace(cluster.Namespace), client.MatchingFields{"metadata.name": ref.Name}); err != nil {
		log.Info("Could not read the control plane's annotations; taking it as not embedding the member removal", "err", err.Error())
		return false
	}
	for _, obj := range list.Items {
		if obj.Name != ref.Name {
			continue
		}
		_, embedded, _ := hook.EmbeddedRemovalHookOf(obj.Annotations)
		return embedded
	}
	return false
}
