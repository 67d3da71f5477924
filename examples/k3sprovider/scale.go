package k3sprovider

import (
	"context"
	"fmt"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/provider"
)

// ScaleDownResult says whether ScaleDown deleted the Machine, and why not.
type ScaleDownResult struct {
	// Deleted is true when the Machine was deleted.
	Deleted bool
	// Reason is the verdict's reason when it was not.
	Reason string
	// Message says why, for the provider's condition and Events.
	Message string
}

// ScaleDown deletes the Machine a scale-down or rollout chose (the provider's own selection, as
// cluster-api-k3s's selectMachineForScaleDown) when etcd allows it: the preflight leaves that
// Machine out, so a broken member does not block its own replacement, and the quorum check
// counts its member as removed. A Machine already deleting waits: one at a time.
func (p *Provider) ScaleDown(ctx context.Context, o provider.Observation, machines []clusterv1.Machine, victim string) (ScaleDownResult, error) {
	for i := range machines {
		if !machines[i].DeletionTimestamp.IsZero() {
			return ScaleDownResult{Reason: "DeletionInProgress", Message: fmt.Sprintf("Machine %s is being deleted", machines[i].Name)}, nil
		}
	}
	m, ok := o.Machine(victim)
	if !ok {
		return ScaleDownResult{}, fmt.Errorf("failed to scale down: Machine %s is not a control-plane Machine of this Cluster", victim)
	}
	if pre := provider.Preflight(o, victim); !pre.Healthy {
		return ScaleDownResult{Reason: "EtcdPreflightFailed", Message: problems(pre)}, nil
	}
	if v := provider.MayScaleDown(o, m); !v.Allowed {
		return ScaleDownResult{Reason: v.Reason, Message: v.Message}, nil
	}
	for i := range machines {
		if machines[i].Name == victim {
			if err := p.Client.Delete(ctx, &machines[i]); err != nil {
				return ScaleDownResult{}, fmt.Errorf("failed to delete Machine %s: %w", victim, err)
			}
		}
	}
	return ScaleDownResult{Deleted: true}, nil
}

// MayRemediate says whether a Machine a MachineHealthCheck marked may be deleted and replaced
// now, as cluster-api-k3s's remediation asks before it deletes.
func MayRemediate(o provider.Observation, victim string) (bool, string) {
	m, ok := o.Machine(victim)
	if !ok {
		return false, fmt.Sprintf("Machine %s is not a control-plane Machine of this Cluster", victim)
	}
	v := provider.MayRemediate(o, m)
	return v.Allowed, v.Reason + ": " + v.Message
}

func problems(pre provider.PreflightResult) string {
	out := make([]string, 0, len(pre.Problems))
	for _, p := range pre.Problems {
		out = append(out, p.Message)
	}
	return strings.Join(out, "; ")
}
