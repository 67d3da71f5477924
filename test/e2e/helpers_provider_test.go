package e2e

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/controlplane/provider"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// testProvider is the smallest control-plane provider that embeds the provider library, as
// KThreesControlPlane would: it scales down by deleting a Machine, and only after the preflight
// and the scale-down gate allowed it. Member removal itself is left to etcd-adapter's hook.
type testProvider struct {
	cluster *clusterv1.Cluster
	etcd    etcd.Cluster
}

// scaleDown deletes one control-plane Machine, the newest by name as a provider's own choice,
// or says why it may not.
func (p *testProvider) scaleDown(ctx context.Context) (*clusterv1.Machine, error) {
	machines, err := p.machines(ctx)
	if err != nil {
		return nil, err
	}
	snap, err := p.etcd.Observe(ctx)
	o := provider.Observation{Snapshot: snap, Err: err, Machines: machines}
	if pre := provider.Preflight(o); !pre.Healthy {
		return nil, fmt.Errorf("preflight failed: %s", pre)
	}
	slices.SortFunc(machines, func(a, b *clusterv1.Machine) int { return cmp.Compare(b.Name, a.Name) })
	target := machines[0]
	if v := provider.MayScaleDown(o, target); !v.Allowed {
		return nil, fmt.Errorf("scale-down of Machine %s refused (%s): %s", target.Name, v.Reason, v.Message)
	}
	if err := mgmt.Client.Delete(ctx, target); err != nil {
		return nil, fmt.Errorf("failed to delete Machine %s: %w", target.Name, err)
	}
	return target, nil
}

func (p *testProvider) machines(ctx context.Context) ([]*clusterv1.Machine, error) {
	list := &clusterv1.MachineList{}
	if err := mgmt.Client.List(ctx, list, client.InNamespace(p.cluster.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: p.cluster.Name}, client.HasLabels{clusterv1.MachineControlPlaneLabel}); err != nil {
		return nil, err
	}
	var out []*clusterv1.Machine
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}
