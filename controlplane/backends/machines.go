package backends

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IsControlPlaneOrEtcdMachine says whether a Machine with these labels is one etcd-adapter reads:
// a control-plane Machine (cluster.x-k8s.io/control-plane, set by every control-plane provider)
// or an etcdadm etcd Machine (EtcdClusterLabel). Only these host etcd members or carry
// etcd-adapter's pre-terminate hook; every other Machine (MachineDeployment, MachineSet and
// MachinePool workers) is never read by etcd-adapter beyond its labels.
//
// Note: a label selector cannot say "one label OR the other", so a cache or a List that needs
// both kinds filters with this function, or lists each kind with its own selector
// (ListControlPlaneAndEtcdMachines).
func IsControlPlaneOrEtcdMachine(labels map[string]string) bool {
	_, cp := labels[clusterv1.MachineControlPlaneLabel]
	_, etcd := labels[EtcdClusterLabel]
	return cp || etcd
}

// ListControlPlaneAndEtcdMachines lists the Machines of a Cluster that etcd-adapter reads and
// may hold with its pre-terminate hook (IsControlPlaneOrEtcdMachine): its control-plane Machines
// and its etcdadm etcd Machines, each once, sorted by name. Every place that looks for "the
// Machines etcd-adapter holds" lists them with this function, so none misses a kind.
//
// Note: each kind is listed with its own label selector rather than every Machine of the Cluster
// filtered: a Cluster may have hundreds of worker Machines, and reader may be uncached.
func ListControlPlaneAndEtcdMachines(ctx context.Context, reader client.Reader, namespace, clusterName string) ([]*clusterv1.Machine, error) {
	var out []*clusterv1.Machine
	for _, label := range []string{clusterv1.MachineControlPlaneLabel, EtcdClusterLabel} {
		list := &clusterv1.MachineList{}
		if err := reader.List(ctx, list, client.InNamespace(namespace),
			client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName}, client.HasLabels{label}); err != nil {
			return nil, fmt.Errorf("failed to list the Machines of Cluster %s with label %s: %w", clusterName, label, err)
		}
		for i := range list.Items {
			m := &list.Items[i]
			if !slices.ContainsFunc(out, func(o *clusterv1.Machine) bool { return o.Name == m.Name }) {
				out = append(out, m)
			}
		}
	}
	slices.SortFunc(out, func(a, b *clusterv1.Machine) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
