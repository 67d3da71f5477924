package controlplaneetcd

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func Test_decideMemberCondition(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { return ptrTime(now.Add(-ago)) }
	healthy := memberObservation{health: etcd.Healthy, reason: v1alpha1.EtcdMemberHealthyReason}
	dead := memberObservation{health: etcd.Unhealthy, reason: v1alpha1.EtcdMemberNotHealthyReason, message: "Etcd member on Node cp-1 does not answer"}
	blind := memberObservation{health: etcd.Unknown, reason: v1alpha1.EtcdMemberConnectionDownReason, message: "Failed to observe etcd: workload cluster unreachable"}
	cond := func(status metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: v1alpha1.MemberHealthyMachineCondition, Status: status, Reason: reason}
	}
	tests := []struct {
		name       string
		observed   memberObservation
		evidence   *v1alpha1.MachineMemberStatus
		current    *metav1.Condition
		wantStatus metav1.ConditionStatus
		wantReason string
		wantMsg    string
		wantEv     v1alpha1.MachineMemberStatus
	}{
		{
			name: "a healthy member of a Machine without the condition is True at once", observed: healthy,
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.EtcdMemberHealthyReason,
			wantEv: v1alpha1.MachineMemberStatus{MachineName: "m", HealthySince: at(0)},
		},
		{
			name: "one failed observation of a True condition leaves it True and starts the clock", observed: dead,
			evidence: &v1alpha1.MachineMemberStatus{MachineName: "m", HealthySince: at(time.Hour)}, current: cond(metav1.ConditionTrue, v1alpha1.EtcdMemberHealthyReason),
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.EtcdMemberHealthyReason, wantMsg: "False once unhealthy for 2m0s",
			wantEv: v1alpha1.MachineMemberStatus{MachineName: "m", UnhealthySince: at(0)},
		},
		{
			name: "unhealthy just short of the timeout: still True", observed: dead,
			evidence: &v1alpha1.MachineMemberStatus{MachineName: "m", UnhealthySince: at(2*time.Minute - time.Second)}, current: cond(metav1.ConditionTrue, v1alpha1.EtcdMemberHealthyReason),
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.EtcdMemberHealthyReason,
			wantEv: v1alpha1.MachineMemberStatus{MachineName: "m", UnhealthySince: at(2*time.Minute - time.Second)},
		},
		{
			name: "unhealthy for the timeout: False with the member's reason and message", observed: dead,
			evidence: &v1alpha1.MachineMemberStatus{MachineName: "m", UnhealthySince: at(2 * time.Minute)}, current: cond(metav1.ConditionTrue, v1alpha1.EtcdMemberHealthyReason),
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.EtcdMemberNotHealthyReason, wantMsg: "Etcd member on Node cp-1 does not answer (unhealthy since 2026-01-02T03:02:05Z)",
			wantEv: v1alpha1.MachineMemberStatus{MachineName: "m", UnhealthySince: at(2 * time.Minute)},
		},
		{
			name: "a restart keeps the clock: evidence from before it, no condition yet, turns False", observed: dead,
			evidence:   &v1alpha1.MachineMemberStatus{MachineName: "m", UnhealthySince: at(5 * time.Minute)},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.EtcdMemberNotHealthyReason,
			wantEv: v1alpha1.MachineMemberStatus{MachineName: "m", UnhealthySince: at(5 * time.Minute)},
		},
		{
			name: "unhealthy with no condition and no evidence: Unknown until the timeout, never False", observed: dead,
			wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.EtcdMemberNotHealthyReason, wantMsg: "False once unhealthy for 2m0s",
			wantEv: v1alpha1.MachineMemberStatus{MachineName: "m", UnhealthySince: at(0)},
		},
		{
			name: "etcd-adapter cannot observe: Unknown, not False, and the clock is left as it was", observed: blind,
			evidence: &v1alpha1.MachineMemberStatus{MachineName: "m", UnhealthySince: at(time.Hour)}, current: cond(metav1.ConditionTrue, v1alpha1.EtcdMemberHealthyReason),
			wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.EtcdMemberConnectionDownReason, wantMsg: "workload cluster unreachable",
			wantEv: v1alpha1.MachineMemberStatus{MachineName: "m", UnhealthySince: at(time.Hour)},
		},
		{
			name: "a False condition whose member answers once stays False and starts the recovery clock", observed: healthy,
			evidence: &v1alpha1.MachineMemberStatus{MachineName: "m", UnhealthySince: at(time.Hour)}, current: cond(metav1.ConditionFalse, v1alpha1.EtcdMemberNotHealthyReason),
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.EtcdMemberNotHealthyReason, wantMsg: "True once healthy for 1m0s",
			wantEv: v1alpha1.MachineMemberStatus{MachineName: "m", HealthySince: at(0)},
		},
		{
			name: "healthy for the recovery time: True again", observed: healthy,
			evidence: &v1alpha1.MachineMemberStatus{MachineName: "m", HealthySince: at(time.Minute)}, current: cond(metav1.ConditionFalse, v1alpha1.EtcdMemberNotHealthyReason),
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.EtcdMemberHealthyReason,
			wantEv: v1alpha1.MachineMemberStatus{MachineName: "m", HealthySince: at(time.Minute)},
		},
		{
			name: "a False condition whose member fails again during recovery stays False", observed: dead,
			evidence: &v1alpha1.MachineMemberStatus{MachineName: "m", HealthySince: at(30 * time.Second)}, current: cond(metav1.ConditionFalse, v1alpha1.EtcdMemberNotHealthyReason),
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.EtcdMemberNotHealthyReason,
			wantEv: v1alpha1.MachineMemberStatus{MachineName: "m", UnhealthySince: at(0)},
		},
		{
			name: "an Unknown condition (etcd-adapter was blind) whose member is healthy is True at once", observed: healthy,
			current:    cond(metav1.ConditionUnknown, v1alpha1.EtcdMemberConnectionDownReason),
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.EtcdMemberHealthyReason,
			wantEv: v1alpha1.MachineMemberStatus{MachineName: "m", HealthySince: at(0)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, ev := decideMemberCondition(memberConditionInput{machine: "m", observed: tt.observed, evidence: tt.evidence, current: tt.current,
				now: now, unhealthyTimeout: 2 * time.Minute, recoveryTime: time.Minute})
			g.Expect(got.Type).To(Equal(v1alpha1.MemberHealthyMachineCondition))
			g.Expect(got.Status).To(Equal(tt.wantStatus))
			g.Expect(got.Reason).To(Equal(tt.wantReason))
			g.Expect(got.Message).To(ContainSubstring(tt.wantMsg))
			g.Expect(ev).To(Equal(tt.wantEv))
		})
	}
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
