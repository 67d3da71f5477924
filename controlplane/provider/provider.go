package provider

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/etcd-adapter/etcd-adapter/pkg/capimachine"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	etcdprovider "github.com/etcd-adapter/etcd-adapter/pkg/etcd/provider"
)

// Observation is one look at a control plane's etcd: the snapshot, or why there is none, and the
// control-plane Machines it is read against.
type Observation struct {
	// Snapshot is what etcd.Cluster.Observe returned; nil when Err is set.
	Snapshot *etcd.Snapshot
	// Err is Observe's error, if any.
	Err error
	// Machines are the control-plane Machines, deleting ones included.
	Machines []*clusterv1.Machine
	// Now is the time verdicts are for; zero means time.Now().
	Now time.Time
}

func (o Observation) now() time.Time {
	if o.Now.IsZero() {
		return time.Now()
	}
	return o.Now
}

func (o Observation) facts() []etcd.Machine {
	out := make([]etcd.Machine, 0, len(o.Machines))
	for _, m := range o.Machines {
		out = append(out, capimachine.Facts(m))
	}
	return out
}

// Health computes the KubeadmControlPlane-compatible conditions of the observation.
func (o Observation) Health() etcd.HealthVerdict {
	return o.light().Health()
}

// light is the observation as pkg/etcd/provider reads it: plain Machine data.
func (o Observation) light() etcdprovider.Observation {
	return etcdprovider.Observation{Snapshot: o.Snapshot, Err: o.Err, Machines: o.facts(), Now: o.now()}
}

// MemberProblem names one member that is not healthy, and why.
type MemberProblem struct {
	// Member is the member as the snapshot gave it.
	Member etcd.Member
	// Machine is the Machine whose Node hosts it; empty when none does.
	Machine string
	// Health is Unhealthy or Unknown, or Healthy for a learner (not a voter yet).
	Health etcd.Health
	// Message says why.
	Message string
}

// PreflightResult says whether a scale-up, scale-down or rollout may start from the current etcd state.
type PreflightResult struct {
	// Healthy is true when, leaving out the Machines being removed, every member is a healthy
	// voter, they agree on the member list and cluster ID, none has alarms, a leader is known,
	// and every Machine hosts a member: the seed proposal's preflight (case 1) plus what this
	// backend can check.
	Healthy bool
	// Members lists every finding: the members that are not healthy voters (Member set), then
	// Machines without a member and cluster-wide findings such as alarms (Member zero).
	Members []MemberProblem
	// Condition is the EtcdClusterHealthy condition; its message holds every finding.
	Condition metav1.Condition
}

// String summarises the result for logs and condition messages.
func (r PreflightResult) String() string {
	if r.Healthy {
		return "etcd is healthy"
	}
	var parts []string
	for _, p := range r.Members {
		parts = append(parts, fmt.Sprintf("%s (%s): %s", p.Member, p.Health, p.Message))
	}
	if len(parts) == 0 {
		return r.Condition.Message
	}
	return strings.Join(parts, "; ")
}

// Preflight decides whether etcd is healthy enough to scale up, scale down or roll out: every
// member healthy, same member list everywhere, no alarms, a leader, every Machine with a member.
// The Machines being removed (a scale-down's or rollout's victim) are left out, as KCP's own
// preflight does: a broken member does not block the removal of its own Machine (see
// pkg/etcd/provider.Preflight, which this wraps). A failed observation is not healthy.
func Preflight(o Observation, removing ...*clusterv1.Machine) PreflightResult {
	names := make([]string, 0, len(removing))
	for _, m := range removing {
		names = append(names, m.Name)
	}
	light := etcdprovider.Preflight(o.light(), names...)
	r := PreflightResult{Healthy: light.Healthy, Condition: o.Health().Cluster}
	for _, p := range light.Problems {
		r.Members = append(r.Members, MemberProblem{Member: p.Member, Machine: p.Machine, Health: p.Health, Message: p.Message})
	}
	return r
}

// MayScaleDown decides whether the Machine may be deleted by a scale-down: every member its
// Node hosts can be removed, one after the other, keeping quorum. Call it right before deleting
// the Machine; a failed observation is never safe.
func MayScaleDown(o Observation, m *clusterv1.Machine) etcd.QuorumVerdict {
	return etcdprovider.MayScaleDown(o.light(), capimachine.Facts(m))
}

// MayRemediate decides whether a Machine marked by a MachineHealthCheck may be deleted and
// replaced without losing quorum. A Machine without a Node, or whose Node hosts no member, does
// not affect etcd; a broken member counts as unhealthy, so remediating it is usually allowed
// while remediating a healthy Machine next to a broken one is refused.
func MayRemediate(o Observation, m *clusterv1.Machine) etcd.QuorumVerdict {
	return etcdprovider.MayRemediate(o.light(), capimachine.Facts(m))
}

// SetConditions writes EtcdMemberHealthy on every Machine of the observation and
// EtcdClusterHealthy on the control-plane object, with KubeadmControlPlane's types and reasons.
// The caller patches the objects. Do not call it for a control plane whose own controller
// already writes these conditions (KubeadmControlPlane does).
func SetConditions(controlPlane conditions.Setter, o Observation) etcd.HealthVerdict {
	v := o.Health()
	for _, m := range o.Machines {
		if c, ok := v.Machines[m.Name]; ok {
			conditions.Set(m, c)
		}
	}
	if controlPlane != nil {
		conditions.Set(controlPlane, v.Cluster)
	}
	return v
}
