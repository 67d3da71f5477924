// Package adopter is the compiling example of docs/adopters-guide.md: how a control-plane
// provider (a KThreesControlPlane-like reconciler) embeds etcd-adapter's backends, the provider
// library (pkg/etcd/provider) and the hook flow (pkg/etcd/hook) instead of leaving member removal
// to the etcd-adapter manager. Its test builds and runs it against a scripted etcd.
package adopter

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/capimachine"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/provider"
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

// ProviderHook is the example provider's own pre-terminate hook, in which it removes members.
// It names the same key in hook.EmbeddedRemovalAnnotation on its control-plane object, so the
// etcd-adapter manager, if it runs, observes only and never waits for it.
var ProviderHook = hook.Hook{Key: hook.PreTerminateHookPrefix + "/example-etcd", Value: "example"}

// Facts converts Cluster API Machines to the plain data the library reads, one line each.
func Facts(machines []*clusterv1.Machine) []etcd.Machine {
	out := make([]etcd.Machine, 0, len(machines))
	for _, m := range machines {
		out = append(out, capimachine.Facts(m))
	}
	return out
}

// conditionSink writes the library's conditions as Cluster API v1beta1 conditions, severity
// included, with KThreesControlPlane's names (provider.KThreesControlPlaneNames), so the
// provider's users keep alerting on what they know.
type conditionSink struct {
	controlPlane v1beta1conditions.Setter
	machines     map[string]*clusterv1.Machine
}

func (s conditionSink) SetMachineCondition(name string, c provider.Condition) {
	if m, ok := s.machines[name]; ok {
		v1beta1conditions.Set(m, v1beta1Condition(c))
	}
}

func (s conditionSink) SetControlPlaneCondition(c provider.Condition) {
	if s.controlPlane != nil {
		v1beta1conditions.Set(s.controlPlane, v1beta1Condition(c))
	}
}

// v1beta1Condition is the library's condition as a Cluster API v1beta1 condition, the type
// Cluster API v1.14 keeps, deprecated, for objects of v1beta1-contract providers.
//
//nolint:staticcheck // v1beta1 conditions are what this provider's users alert on (conditionSink)
func v1beta1Condition(c provider.Condition) *clusterv1.Condition {
	return &clusterv1.Condition{Type: clusterv1.ConditionType(c.Type), Status: corev1.ConditionStatus(c.Status),
		Severity: clusterv1.ConditionSeverity(c.Severity), Reason: c.Reason, Message: c.Message}
}

// ScaleDownDecision is what a provider's scale-down step decides.
type ScaleDownDecision struct {
	// Delete says the provider may delete the Machine now.
	Delete bool
	// Why is the reason, for the provider's own condition and Events.
	Why string
}

// ScaleDown is the provider's scale-down (or rollout) step: observe once, write the conditions
// its users alert on, refuse while etcd is not healthy leaving out the victim (a broken member
// does not block the removal of its own Machine), and delete the victim only when the quorum
// gate allows it. The member itself is removed later, after the drain, by
// RemoveMemberAfterDrain in the provider's pre-terminate hook.
func ScaleDown(ctx context.Context, c etcd.Cluster, controlPlane v1beta1conditions.Setter, machines []*clusterv1.Machine, victim *clusterv1.Machine, now time.Time) ScaleDownDecision {
	snapshot, err := c.Observe(ctx)
	o := provider.Observation{Snapshot: snapshot, Err: err, Machines: Facts(machines), Now: now}
	byName := make(map[string]*clusterv1.Machine, len(machines))
	for _, m := range machines {
		byName[m.Name] = m
	}
	provider.WriteConditions(conditionSink{controlPlane: controlPlane, machines: byName}, provider.KThreesControlPlaneNames, o)
	if pre := provider.Preflight(o, victim.Name); !pre.Healthy {
		return ScaleDownDecision{Why: "etcd is not healthy: " + pre.String()}
	}
	v := provider.MayScaleDown(o, capimachine.Facts(victim))
	return ScaleDownDecision{Delete: v.Allowed, Why: fmt.Sprintf("%s: %s", v.Reason, v.Message)}
}

// Patcher patches a Machine's annotations with the provider's client (a merge patch).
func Patcher(k client.Client, namespace string) hook.PatchFunc {
	return func(ctx context.Context, name string, set map[string]string, remove []string) error {
		m := &clusterv1.Machine{}
		if err := k.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m); err != nil {
			return fmt.Errorf("failed to get Machine %s/%s: %w", namespace, name, err)
		}
		before := m.DeepCopy()
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		maps.Copy(m.Annotations, set)
		for _, key := range remove {
			delete(m.Annotations, key)
		}
		if err := k.Patch(ctx, m, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("failed to patch the annotations of Machine %s/%s: %w", namespace, name, err)
		}
		return nil
	}
}

// MachineState is what the hook flow reads of a Machine: its facts, annotations and the reason
// of its Deleting condition.
func MachineState(m *clusterv1.Machine) hook.MachineState {
	s := hook.MachineState{Machine: capimachine.Facts(m), Annotations: m.Annotations}
	if c := conditions.Get(m, clusterv1.MachineDeletingCondition); c != nil {
		s.DeletingReason = c.Reason
	}
	return s
}

// PlaceHook puts ProviderHook on a control-plane Machine that is not deleting: call it for every
// control-plane Machine on every reconcile, so any deletion (a scale-down, a remediation, a
// kubectl delete) drains the Node before the member goes.
func PlaceHook(ctx context.Context, k client.Client, m *clusterv1.Machine) (bool, error) {
	return hook.Place(ctx, Patcher(k, m.Namespace), MachineState(m), ProviderHook)
}

// RemoveMemberAfterDrain moves the hook flow of a deleting control-plane Machine one step: it
// waits for the drain and for the other pre-terminate hooks, re-checks quorum on a fresh
// observation, moves leadership off, removes the member, and releases ProviderHook once no member
// of the Machine is left. A removal etcd (or K3s) rejects keeps the hook (Phase Rejected, the
// reason kept on the Machine) until a person annotates the Machine
// etcd-adapter.cluster.x-k8s.io/retry-removal=true or release-hook=true. Call it for one
// deleting Machine of a Cluster at a time, on every reconcile, until the outcome is Done; show
// the outcome's Phase and Message in the provider's own condition. cpDeleting says the Cluster or
// the control-plane object is being deleted: the hooks are then released without a removal.
func RemoveMemberAfterDrain(ctx context.Context, c etcd.Cluster, k client.Client, cp hook.ControlPlane, cpDeleting bool, machines []*clusterv1.Machine, m *clusterv1.Machine, now time.Time) (hook.Outcome, error) {
	f := hook.Flow{Hook: ProviderHook, Cluster: c, Patch: Patcher(k, m.Namespace), ControlPlane: cp, ControlPlaneDeleting: cpDeleting,
		Machines: Facts(machines), Now: now}
	return f.Step(ctx, MachineState(m))
}

// RemovalCondition is the provider's own condition on a deleting Machine, from the hook flow's
// outcome: False with the phase as reason while the flow waits, is blocked or was rejected.
func RemovalCondition(o hook.Outcome) metav1.Condition {
	status := metav1.ConditionFalse
	if o.Done() {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: "EtcdMemberRemoved", Status: status, Reason: string(o.Phase), Message: o.Message}
}
