// Package adopter is the compiling example of docs/adopters-guide.md: how a control-plane
// provider (a KThreesControlPlane-like reconciler) embeds etcd-adapter's backends and provider
// library instead of running the etcd-adapter manager. Its test builds and runs it against a
// scripted etcd.
package adopter

import (
	"context"
	"fmt"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/controlplane/provider"
	"github.com/etcd-adapter/etcd-adapter/pkg/capimachine"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm"
)

// EtcdFor builds the etcd.Cluster of a workload cluster from CAPI's ClusterCache: kubeadm's
// stacked etcd through the apiserver's port-forward, or K3s's embedded etcd through its Node
// objects. Keep the result per Cluster (a kubeadm backend pools its member connections; Close it
// when the Cluster goes).
func EtcdFor(ctx context.Context, cc clustercache.ClusterCache, mgmt client.Reader, cluster *clusterv1.Cluster, embedded bool) (etcd.Cluster, error) {
	key := client.ObjectKeyFromObject(cluster)
	if !embedded {
		b, err := kubeadm.New(kubeadm.Config{
			Cluster: key, ClusterUID: cluster.UID, Client: mgmt,
			RESTConfig: kubeadm.FromClusterCache(cc, key),
		})
		if err != nil {
			return nil, fmt.Errorf("failed to create the kubeadm etcd backend of Cluster %s: %w", key, err)
		}
		return b, nil
	}
	uncached, err := cc.GetUncachedClient(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("failed to reach workload cluster %s: %w", key, err)
	}
	reader, err := cc.GetReader(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("failed to reach workload cluster %s: %w", key, err)
	}
	b, err := k3s.New(k3s.Config{Client: uncached, Reader: reader})
	if err != nil {
		return nil, fmt.Errorf("failed to create the K3s etcd backend of Cluster %s: %w", key, err)
	}
	return b, nil
}

// ScaleDownDecision is what a provider's scale-down step decides.
type ScaleDownDecision struct {
	// Delete says the provider may delete the Machine now.
	Delete bool
	// Why is the reason, for the provider's own condition and Events.
	Why string
}

// ScaleDown is the provider's scale-down step: observe once, write the KCP-compatible conditions
// its users alert on (EtcdClusterHealthy on the control-plane object, EtcdMemberHealthy on the
// Machines), refuse while etcd is not healthy, and delete the chosen Machine only when the quorum
// gate allows it. The member itself is removed later, after the drain, by RemoveMemberAfterDrain
// in the provider's pre-terminate hook.
func ScaleDown(ctx context.Context, c etcd.Cluster, controlPlane conditions.Setter, machines []*clusterv1.Machine, victim *clusterv1.Machine, now time.Time) ScaleDownDecision {
	snapshot, err := c.Observe(ctx)
	o := provider.Observation{Snapshot: snapshot, Err: err, Machines: machines, Now: now}
	provider.SetConditions(controlPlane, o)
	if pre := provider.Preflight(o); !pre.Healthy {
		return ScaleDownDecision{Why: "etcd is not healthy: " + pre.String()}
	}
	v := provider.MayScaleDown(o, victim)
	return ScaleDownDecision{Delete: v.Allowed, Why: fmt.Sprintf("%s: %s", v.Reason, v.Message)}
}

// RemoveMemberAfterDrain runs in the provider's pre-terminate hook, once the Machine's Deleting
// reason is WaitingForPreTerminateHook (the Node is drained): it removes the members on the
// Machine's Node by identity, one per call, moving leadership off first, and reports when none is
// left, so the provider may release its hook. Call it again on the next reconcile while it
// reports not done.
func RemoveMemberAfterDrain(ctx context.Context, c etcd.Cluster, machines []*clusterv1.Machine, m *clusterv1.Machine, now time.Time) (done bool, why string, err error) {
	snapshot, err := c.Observe(ctx)
	if err != nil {
		return false, "", fmt.Errorf("failed to observe etcd before removing the member of Machine %s: %w", m.Name, err)
	}
	assessed := etcd.AssessMembers(snapshot, now)
	targets := etcd.RemovalOrder(assessed, snapshot.MembersOnNode(m.Status.NodeRef.Name))
	switch {
	case len(targets) == 0:
		return true, "no member left on the Node", nil
	case len(targets) == len(snapshot.Members):
		return true, "the last member is never removed", nil
	}
	target := targets[0]
	// Important! Check again right before the destructive call, on this call's own snapshot.
	if v := etcd.CanRemoveMember(snapshot, now, target); !v.Allowed {
		return false, fmt.Sprintf("not safe now (%s): %s", v.Reason, v.Message), nil
	}
	if snapshot.LeaderID == target.ID {
		facts := make([]etcd.Machine, 0, len(machines))
		for _, mm := range machines {
			facts = append(facts, capimachine.Facts(mm))
		}
		for _, to := range etcd.LeaderCandidates(assessed, facts, target) {
			if _, err := c.MoveLeader(ctx, target, to); err == nil {
				return false, fmt.Sprintf("moved leadership from %s to %s", target, to), nil
			}
		}
	}
	r, err := c.RemoveMember(ctx, target)
	if err != nil {
		return false, "", fmt.Errorf("failed to remove etcd member %s: %w", target, err)
	}
	why = fmt.Sprintf("member %s: %s", target, r.State)
	if r.Reason != "" {
		why += " (" + r.Reason + ")"
	}
	return false, why, nil
}
