package backends

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// EtcdadmClusterGroupKind is the etcdadm provider's etcd cluster kind (aws/etcdadm-controller
// api/v1beta1/etcdadmcluster_types.go).
var EtcdadmClusterGroupKind = schema.GroupKind{Group: "etcdcluster.cluster.x-k8s.io", Kind: "EtcdadmCluster"}

// EtcdClusterLabel is the label the etcdadm controller gives each etcd Machine, valued with its
// EtcdadmCluster's name (aws/etcdadm-controller controllers/helpers.go EtcdLabelsForCluster,
// clusterv1.MachineEtcdClusterLabelName of the Cluster API fork it builds with). Upstream Cluster
// API has no such constant; the etcd Machines carry no control-plane label and run no Node.
const EtcdClusterLabel = "cluster.x-k8s.io/etcd-cluster"

// FindEtcdadmCluster returns the EtcdadmCluster the Cluster owns, read as unstructured in the
// version the mapper prefers. The link is the one the etcdadm controller itself follows: the
// EtcdadmCluster's owner reference to its Cluster (controllers/controller.go Reconcile,
// util.GetOwnerCluster), which Cluster API's Cluster controller sets in the forks that have
// spec.managedExternalEtcdRef; upstream Cluster API v1.14 has no such field (its Cluster CRD prunes
// it), so that reference is not read. It returns nil and no error when the kind is not installed
// or the Cluster owns none. Two EtcdadmClusters owned by one Cluster are an error wrapping
// etcd.ErrInvalidInput: which one is its etcd is not guessed. A failed read wraps
// etcd.ErrUnreachable.
func FindEtcdadmCluster(ctx context.Context, c client.Reader, mapper meta.RESTMapper, cluster *clusterv1.Cluster) (*unstructured.Unstructured, error) {
	if mapper == nil {
		return nil, nil
	}
	mapping, err := mapper.RESTMapping(EtcdadmClusterGroupKind)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: failed to map kind %s: %w", etcd.ErrUnreachable, EtcdadmClusterGroupKind, err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(mapping.GroupVersionKind.Kind + "List"))
	if err := c.List(ctx, list, client.InNamespace(cluster.Namespace)); err != nil {
		return nil, fmt.Errorf("%w: failed to list EtcdadmClusters in namespace %s: %w", etcd.ErrUnreachable, cluster.Namespace, err)
	}
	var owned []*unstructured.Unstructured
	for i := range list.Items {
		if ownedByCluster(&list.Items[i], cluster) {
			owned = append(owned, &list.Items[i])
		}
	}
	switch len(owned) {
	case 0:
		return nil, nil
	case 1:
		return owned[0], nil
	}
	names := make([]string, 0, len(owned))
	for _, o := range owned {
		names = append(names, o.GetName())
	}
	slices.Sort(names)
	return nil, fmt.Errorf("%w: Cluster %s owns %d EtcdadmClusters (%s); which one is its etcd is not guessed",
		etcd.ErrInvalidInput, client.ObjectKeyFromObject(cluster), len(owned), strings.Join(names, ", "))
}

// ownedByCluster reports whether obj has an owner reference to the Cluster: kind Cluster of
// Cluster API's group (any version), its name, and its UID when the reference has one.
func ownedByCluster(obj *unstructured.Unstructured, cluster *clusterv1.Cluster) bool {
	for _, ref := range obj.GetOwnerReferences() {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != clusterv1.GroupVersion.Group || ref.Kind != "Cluster" || ref.Name != cluster.Name {
			continue
		}
		if ref.UID == "" || ref.UID == cluster.UID {
			return true
		}
	}
	return false
}

// EtcdadmEndpointsOf returns the client URLs in the EtcdadmCluster's status.endpoints, which the
// etcdadm controller writes as one comma-separated string once every etcd Machine passed its
// health check (controllers/status.go updateStatus). None yet, or a field that is not a string,
// is an error wrapping etcd.ErrInvalidInput: which members to ask is then not known.
func EtcdadmEndpointsOf(obj *unstructured.Unstructured) ([]string, error) {
	s, found, err := unstructured.NestedString(obj.Object, "status", "endpoints")
	if err != nil {
		return nil, fmt.Errorf("%w: EtcdadmCluster %s: status.endpoints is not a comma-separated string of URLs: %w",
			etcd.ErrInvalidInput, client.ObjectKeyFromObject(obj), err)
	}
	var endpoints []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			endpoints = append(endpoints, e)
		}
	}
	if !found || len(endpoints) == 0 {
		return nil, fmt.Errorf("%w: EtcdadmCluster %s has no status.endpoints yet (the etcdadm controller writes them once every etcd Machine passed its health check)",
			etcd.ErrInvalidInput, client.ObjectKeyFromObject(obj))
	}
	return endpoints, nil
}

// EtcdadmMachineHosts returns the addresses (status.addresses) of the EtcdadmCluster's etcd
// Machines, once each and sorted: the etcdadm controller builds status.endpoints from them
// (controllers/status.go), and a member it joined before status.endpoints names it reports a
// client URL on one of them. A failed list wraps etcd.ErrUnreachable.
func EtcdadmMachineHosts(ctx context.Context, c client.Reader, cluster *clusterv1.Cluster, etcdadmCluster string) ([]string, error) {
	list := &clusterv1.MachineList{}
	if err := c.List(ctx, list, client.InNamespace(cluster.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name, EtcdClusterLabel: etcdadmCluster}); err != nil {
		return nil, fmt.Errorf("%w: failed to list the etcd Machines of EtcdadmCluster %s/%s: %w", etcd.ErrUnreachable, cluster.Namespace, etcdadmCluster, err)
	}
	var hosts []string
	for _, m := range list.Items {
		for _, a := range m.Status.Addresses {
			if a.Address != "" {
				hosts = append(hosts, a.Address)
			}
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts), nil
}
