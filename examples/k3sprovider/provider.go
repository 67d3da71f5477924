package k3sprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/provider"
)

// Provider is the etcd side of one Cluster's control plane, as the provider's reconciler wires it
// on each reconcile.
type Provider struct {
	// Client reaches the management cluster: it deletes and patches Machines.
	Client client.Client
	// Etcd is the workload cluster's etcd, here the K3s backend (pkg/k3s) over its Nodes.
	Etcd etcd.Cluster
	// Hook is the provider's own pre-terminate hook; the provider also sets
	// hook.EmbeddedRemovalAnnotation to its key on the control-plane object, so an etcd-adapter
	// manager running beside it only observes the Cluster.
	Hook hook.Hook
	// ControlPlane is what the hook order depends on (kind, version, the embedded hook).
	ControlPlane hook.ControlPlane
	// Now is the time verdicts are for; nil means time.Now.
	Now func() time.Time
}

func (p *Provider) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

// Observe looks at etcd once and reads it against the control-plane Machines. A failed look is
// kept in the observation: every gate then refuses, and the conditions say why.
func (p *Provider) Observe(ctx context.Context, machines []clusterv1.Machine) provider.Observation {
	s, err := p.Etcd.Observe(ctx)
	return provider.Observation{Snapshot: s, Err: err, Machines: factsOf(machines), Now: p.now()}
}

// WriteConditions writes the provider's own v1beta1 etcd conditions on the control-plane object
// and its Machines; the caller patches them.
func WriteConditions(o provider.Observation, cp ConditionSink) etcd.HealthVerdict {
	return provider.WriteConditions(cp, provider.KThreesControlPlaneNames, o)
}

// EnsureHook places the provider's pre-terminate hook on a control-plane Machine that lacks it, so
// any deletion (a scale-down, a remediation, kubectl delete) drains the Node before the member
// goes.
func (p *Provider) EnsureHook(ctx context.Context, m *clusterv1.Machine) (bool, error) {
	return hook.Place(ctx, p.patch(m.Namespace), State(m), p.Hook)
}

// ReconcileDeletingMachine moves the removal of a deleting Machine's member one step: Cluster API
// drains the Node first (the hook holds the infrastructure), then the member is removed and the
// hook released. Call it for one deleting Machine of the Cluster at a time, until Done.
func (p *Provider) ReconcileDeletingMachine(ctx context.Context, m *clusterv1.Machine, machines []clusterv1.Machine) (hook.Outcome, error) {
	f := hook.Flow{
		Hook:         p.Hook,
		Cluster:      p.Etcd,
		Patch:        p.patch(m.Namespace),
		ControlPlane: p.ControlPlane,
		Machines:     factsOf(machines),
		Now:          p.now(),
	}
	out, err := f.Step(ctx, State(m))
	if err != nil {
		return out, fmt.Errorf("failed to remove the etcd member of Machine %s: %w", m.Name, err)
	}
	return out, nil
}

// patch merges annotations into a Machine's metadata; a key to remove is sent as null.
func (p *Provider) patch(namespace string) hook.PatchFunc {
	return func(ctx context.Context, machine string, set map[string]string, remove []string) error {
		annotations := map[string]any{}
		for k, v := range set {
			annotations[k] = v
		}
		for _, k := range remove {
			annotations[k] = nil
		}
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
		if err != nil {
			return fmt.Errorf("failed to encode the annotations of Machine %s: %w", machine, err)
		}
		m := &clusterv1.Machine{}
		m.Namespace, m.Name = namespace, machine
		if err := p.Client.Patch(ctx, m, client.RawPatch(types.MergePatchType, body)); err != nil {
			return fmt.Errorf("failed to patch the annotations of Machine %s: %w", machine, err)
		}
		return nil
	}
}

func factsOf(machines []clusterv1.Machine) []etcd.Machine {
	out := make([]etcd.Machine, 0, len(machines))
	for i := range machines {
		out = append(out, Facts(&machines[i]))
	}
	return out
}
