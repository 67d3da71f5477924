package setup

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
)

// MachineCacheOptions are the cache options for Machines of a manager running these controllers:
// every Machine is cached (the ControlPlaneEtcd controller watches Machines and the hook
// hand-back controller is For Machines), but trimmed by TrimMachine, so that the manager's memory
// grows with the fleet's control-plane and etcd Machines only, not with its worker Machines.
//
// Note: set them as the ByObject entry for &clusterv1.Machine{}; a ByObject transform replaces
// the cache's DefaultTransform for that type, and TrimMachine strips managed fields itself.
func MachineCacheOptions() cache.ByObject {
	return cache.ByObject{Transform: TrimMachine}
}

// TrimMachine is a cache transform for Machines. It keeps control-plane and etcd Machines
// (backends.IsControlPlaneOrEtcdMachine) whole but for their managed fields, and keeps of every
// other Machine (MachineDeployment, MachineSet and MachinePool workers, which a fleet has by the
// hundred thousand) only what tells it is not one of those and keeps the cache correct:
//
//   - namespace, name, UID, resource version and generation: the cache's key and the object's
//     identity, so a Get, a List and the watch events still name the right object;
//   - labels: a List with a label selector (cluster name, control-plane label) filters the cached
//     objects, so they must carry the labels the apiserver has, or a selector would match
//     differently from the apiserver;
//   - deletion timestamp: whether the Machine is being deleted stays true to the apiserver.
//
// Spec, status, annotations, finalizers and owner references of a worker Machine are dropped: no
// controller, webhook or metric of etcd-adapter reads them (each lists or gets only control-plane
// or etcd Machines, by label, and the webhooks decode the Machine from the admission request).
// Objects that are not Machines, such as the cache.DeletedFinalStateUnknown tombstone of a
// deletion the informer missed (whose object was trimmed when it was stored), are returned
// unchanged. It may be applied more than once to the same object.
//
// Important! A trimmed Machine read from the cache must never be written back whole (Update): it
// would clear the Machine's spec. etcd-adapter writes Machines only with merge patches of what it
// changed (client.MergeFrom), and only control-plane and etcd Machines.
func TrimMachine(obj any) (any, error) {
	m, ok := obj.(*clusterv1.Machine)
	if !ok {
		return obj, nil
	}
	m.ManagedFields = nil
	if backends.IsControlPlaneOrEtcdMachine(m.Labels) {
		return m, nil
	}
	return &clusterv1.Machine{
		TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         m.Namespace,
			Name:              m.Name,
			UID:               m.UID,
			ResourceVersion:   m.ResourceVersion,
			Generation:        m.Generation,
			DeletionTimestamp: m.DeletionTimestamp,
			Labels:            m.Labels,
		},
	}, nil
}
