package controlplaneetcd

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
)

// clusterToControlPlaneEtcd maps a Cluster to the ControlPlaneEtcds that name it.
func (r *Reconciler) clusterToControlPlaneEtcd(ctx context.Context, o client.Object) []ctrl.Request {
	return r.requestsFor(ctx, o.GetNamespace(), o.GetName())
}

// machineToControlPlaneEtcd maps a control-plane Machine, or an etcdadm etcd Machine, to its
// Cluster's ControlPlaneEtcds: both carry etcd members and the pre-terminate hook.
func (r *Reconciler) machineToControlPlaneEtcd(ctx context.Context, o client.Object) []ctrl.Request {
	labels := o.GetLabels()
	if !backends.IsControlPlaneOrEtcdMachine(labels) {
		return nil
	}
	return r.requestsFor(ctx, o.GetNamespace(), labels[clusterv1.ClusterNameLabel])
}

func (r *Reconciler) requestsFor(ctx context.Context, namespace, clusterName string) []ctrl.Request {
	if clusterName == "" {
		return nil
	}
	list := &v1alpha1.ControlPlaneEtcdList{}
	if err := r.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{v1alpha1.ClusterNameField: clusterName},
		client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list ControlPlaneEtcds", "namespace", namespace, "Cluster", clusterName)
		return nil
	}
	out := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// nodeChanged lets through Node events that can change etcd's picture: creation, deletion, and
// updates of labels, annotations (K3s's etcd keys), unschedulable, or a condition's status,
// reason or message. Heartbeats alone (every few seconds per Node) do not reconcile.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldNode, ok1 := e.ObjectOld.(*corev1.Node)
			newNode, ok2 := e.ObjectNew.(*corev1.Node)
			if !ok1 || !ok2 {
				return true
			}
			return !reflect.DeepEqual(oldNode.Labels, newNode.Labels) ||
				!reflect.DeepEqual(oldNode.Annotations, newNode.Annotations) ||
				oldNode.Spec.Unschedulable != newNode.Spec.Unschedulable ||
				!oldNode.DeletionTimestamp.Equal(newNode.DeletionTimestamp) ||
				!sameConditions(oldNode.Status.Conditions, newNode.Status.Conditions)
		},
	}
}

func sameConditions(a, b []corev1.NodeCondition) bool {
	if len(a) != len(b) {
		return false
	}
	type key struct {
		status          corev1.ConditionStatus
		reason, message string
	}
	seen := map[corev1.NodeConditionType]key{}
	for _, c := range a {
		seen[c.Type] = key{c.Status, c.Reason, c.Message}
	}
	for _, c := range b {
		if k, ok := seen[c.Type]; !ok || k != (key{c.Status, c.Reason, c.Message}) {
			return false
		}
	}
	return true
}
