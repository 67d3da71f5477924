package controlplaneetcd

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// memberObservation is what one pass saw of the member of one Machine: its health and the
// EtcdMemberHealthy reason and message that go with it (those of status.members).
type memberObservation struct {
	health  etcd.Health
	reason  string
	message string
}

// memberConditionInput is what the EtcdAdapterMemberHealthy condition of one Machine is decided
// from.
type memberConditionInput struct {
	machine  string
	observed memberObservation
	// evidence is the Machine's entry of status.machineMembers; nil when it has none yet.
	evidence *v1alpha1.MachineMemberStatus
	// current is the condition on the Machine now; nil when it has none.
	current          *metav1.Condition
	now              time.Time
	unhealthyTimeout time.Duration
	recoveryTime     time.Duration
}

// decideMemberCondition returns the Machine's EtcdAdapterMemberHealthy condition and its new
// evidence. The clocks run on the evidence, not on the condition: an unhealthy member turns the
// condition False only once it was seen unhealthy on every observation for unhealthyTimeout, and
// a False condition turns True only once the member was seen healthy for recoveryTime. An
// observation that could not tell (etcd unreachable, stale K3s evidence) touches no clock and
// makes the condition Unknown, never False: a MachineHealthCheck must not remediate a Machine
// because etcd-adapter, or the workload apiserver, is down.
func decideMemberCondition(in memberConditionInput) (metav1.Condition, v1alpha1.MachineMemberStatus) {
	ev := v1alpha1.MachineMemberStatus{MachineName: in.machine}
	if in.evidence != nil {
		ev = *in.evidence.DeepCopy()
	}
	now := metav1.NewTime(in.now)
	switch in.observed.health {
	case etcd.Healthy:
		ev.UnhealthySince = nil
		if ev.HealthySince == nil {
			ev.HealthySince = &now
		}
		return healthyCondition(in, ev), ev
	case etcd.Unhealthy:
		ev.HealthySince = nil
		if ev.UnhealthySince == nil {
			ev.UnhealthySince = &now
		}
		return unhealthyCondition(in, ev), ev
	}
	return memberHealthyCondition(metav1.ConditionUnknown, in.observed.reason,
		"Etcd-adapter cannot tell whether the member is healthy: "+in.observed.message), ev
}

func healthyCondition(in memberConditionInput, ev v1alpha1.MachineMemberStatus) metav1.Condition {
	if in.current != nil && in.current.Status == metav1.ConditionFalse && in.now.Sub(ev.HealthySince.Time) < in.recoveryTime {
		return memberHealthyCondition(metav1.ConditionFalse, in.current.Reason, fmt.Sprintf(
			"Member is healthy again since %s; True once healthy for %s", ev.HealthySince.UTC().Format(time.RFC3339), in.recoveryTime))
	}
	return memberHealthyCondition(metav1.ConditionTrue, v1alpha1.EtcdMemberHealthyReason, "")
}

func unhealthyCondition(in memberConditionInput, ev v1alpha1.MachineMemberStatus) metav1.Condition {
	since := ev.UnhealthySince.UTC().Format(time.RFC3339)
	unhealthy := fmt.Sprintf("%s (unhealthy since %s)", in.observed.message, since)
	switch {
	case in.now.Sub(ev.UnhealthySince.Time) >= in.unhealthyTimeout:
		return memberHealthyCondition(metav1.ConditionFalse, in.observed.reason, unhealthy)
	case in.current != nil && in.current.Status == metav1.ConditionFalse:
		// Note: it never recovered for recoveryTime, so it stays False.
		return memberHealthyCondition(metav1.ConditionFalse, in.observed.reason, unhealthy)
	}
	pending := fmt.Sprintf("%s (unhealthy since %s; False once unhealthy for %s)", in.observed.message, since, in.unhealthyTimeout)
	if in.current != nil && in.current.Status == metav1.ConditionTrue {
		return memberHealthyCondition(metav1.ConditionTrue, v1alpha1.EtcdMemberHealthyReason, pending)
	}
	return memberHealthyCondition(metav1.ConditionUnknown, in.observed.reason, pending)
}

func memberHealthyCondition(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: v1alpha1.MemberHealthyMachineCondition, Status: status, Reason: reason,
		Message: etcd.Truncate(msg, etcd.MaxConditionMessageBytes)}
}

// observationFrom turns a Machine's EtcdMemberHealthy condition of the pass's health verdict into
// what the pass saw of its member.
func observationFrom(c metav1.Condition) memberObservation {
	o := memberObservation{health: etcd.Unknown, reason: c.Reason, message: c.Message}
	switch c.Status {
	case metav1.ConditionTrue:
		o.health = etcd.Healthy
	case metav1.ConditionFalse:
		o.health = etcd.Unhealthy
	}
	if o.message == "" {
		o.message = "Member is not healthy"
		if o.health == etcd.Healthy {
			o.message = ""
		}
	}
	return o
}
