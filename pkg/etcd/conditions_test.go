package etcd

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAssessHealth_machineConditions(t *testing.T) {
	tests := []struct {
		name    string
		in      HealthInput
		machine string
		want    metav1.ConditionStatus
		reason  string
		message string
	}{
		{
			name:    "a healthy voter on the Machine's Node is Healthy",
			in:      HealthInput{Snapshot: cluster(3), Machines: machines(3)},
			machine: "m-cp-0",
			want:    metav1.ConditionTrue, reason: MemberHealthyReason,
		},
		{
			name:    "a Machine whose Node hosts no member is NotHealthy",
			in:      HealthInput{Snapshot: cluster(2), Machines: machines(3)},
			machine: "m-cp-2",
			want:    metav1.ConditionFalse, reason: MemberNotHealthyReason,
			message: "Etcd reports the cluster is composed of [cp-0, cp-1], but no member is hosted on Node cp-2 of Machine m-cp-2",
		},
		{
			name:    "a Machine whose Node hosts two members with one name is NotHealthy and names both",
			in:      HealthInput{Snapshot: with(cluster(3), sharedName), Machines: machines(3)},
			machine: "m-cp-2",
			want:    metav1.ConditionFalse, reason: MemberNotHealthyReason,
			message: "Etcd members 3 (peer URLs https://10.0.0.3:2380) and 9 (peer URLs https://10.0.0.9:2380) share the name cp-2: remove the one that is not running by its ID; etcd member cp-2 was not asked",
		},
		{
			name:    "a learner is waiting to be promoted",
			in:      HealthInput{Snapshot: with(cluster(3), learner(3)), Machines: machines(3)},
			machine: "m-cp-2",
			want:    metav1.ConditionFalse, reason: MemberNotHealthyReason,
			message: "Waiting for learner etcd member to be promoted",
		},
		{
			name:    "alarms make the member NotHealthy",
			in:      HealthInput{Snapshot: with(cluster(3), evidence(2, alarms(AlarmNoSpace))), Machines: machines(3)},
			machine: "m-cp-1",
			want:    metav1.ConditionFalse, reason: MemberNotHealthyReason,
			message: "Etcd member cp-1 reports alarms: NOSPACE",
		},
		{
			name:    "stale evidence is InspectionFailed and Unknown",
			in:      HealthInput{Snapshot: with(cluster(3), evidence(2, func(e *MemberEvidence) { e.ObservedAt = testNow.Add(-time.Hour) })), Machines: machines(3)},
			machine: "m-cp-1",
			want:    metav1.ConditionUnknown, reason: MemberInspectionFailedReason,
			message: "The last evidence about etcd member cp-1 is 1h0m0s old, older than the 2m0s it can be trusted",
		},
		{
			name:    "a deleting Machine is Deleting",
			in:      HealthInput{Snapshot: cluster(3), Machines: deleting(machines(3), "m-cp-1")},
			machine: "m-cp-1",
			want:    metav1.ConditionFalse, reason: MemberDeletingReason, message: "Machine is deleting",
		},
		{
			name:    "a provisioning Machine waits for its Node",
			in:      HealthInput{Snapshot: cluster(3), Machines: append(machines(3), Machine{Name: "m-new", ProviderID: "test://m-new"})},
			machine: "m-new",
			want:    metav1.ConditionUnknown, reason: MemberInspectionFailedReason,
			message: "Waiting for a Node with spec.providerID test://m-new to exist",
		},
		{
			name:    "etcd unreachable is ConnectionDown",
			in:      HealthInput{ObserveErr: fmt.Errorf("%w: apiserver: connection refused", ErrUnreachable), Machines: machines(3)},
			machine: "m-cp-0",
			want:    metav1.ConditionUnknown, reason: MemberConnectionDownReason,
			message: "Failed to observe etcd: cannot reach etcd: apiserver: connection refused",
		},
		{
			name:    "any other observation failure is InspectionFailed",
			in:      HealthInput{ObserveErr: fmt.Errorf("%w: Secret default/c1-etcd not found", ErrInvalidInput), Machines: machines(3)},
			machine: "m-cp-0",
			want:    metav1.ConditionUnknown, reason: MemberInspectionFailedReason,
			message: "Failed to observe etcd: invalid input: Secret default/c1-etcd not found",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tt.in.Now = testNow
			got := AssessHealth(tt.in).Machines[tt.machine]
			g.Expect(got.Type).To(Equal(MemberHealthyCondition))
			g.Expect(got.Status).To(Equal(tt.want))
			g.Expect(got.Reason).To(Equal(tt.reason))
			g.Expect(got.Message).To(Equal(tt.message))
		})
	}
}

func TestAssessHealth_clusterCondition(t *testing.T) {
	tests := []struct {
		name         string
		in           HealthInput
		want         metav1.ConditionStatus
		reason       string
		messageParts []string
	}{
		{
			name: "all members healthy",
			in:   HealthInput{Snapshot: cluster(3), Machines: machines(3)},
			want: metav1.ConditionTrue, reason: ClusterHealthyReason,
		},
		{
			name: "a member without a Machine (ghost) is a cluster problem",
			in:   HealthInput{Snapshot: cluster(3), Machines: machines(2)},
			want: metav1.ConditionFalse, reason: ClusterNotHealthyReason,
			messageParts: []string{"Etcd member cp-2 has no corresponding Machine"},
		},
		{
			name: "members that run on no Machine (external etcd) are not ghosts",
			in:   HealthInput{Snapshot: cluster(3), MembersOffMachines: true},
			want: metav1.ConditionTrue, reason: ClusterHealthyReason,
		},
		{
			name: "a member that runs on no Machine (external etcd) and does not answer makes the cluster not healthy",
			in: HealthInput{Snapshot: with(cluster(3), evidence(3, func(ev *MemberEvidence) {
				*ev = MemberEvidence{MemberID: 3, Contact: ContactUnreachable, Error: "connection refused", ObservedAt: ev.ObservedAt}
			})), MembersOffMachines: true},
			want: metav1.ConditionFalse, reason: ClusterNotHealthyReason,
			messageParts: []string{"Member cp-2", "connection refused"},
		},
		{
			name: "members that run on no Machine (external etcd) are still reported when they never started",
			in:   HealthInput{Snapshot: with(cluster(3), addMember(Member{ID: 0xab, IsLearner: true})), MembersOffMachines: true},
			want: metav1.ConditionFalse, reason: ClusterNotHealthyReason,
			messageParts: []string{"was added but never started"},
		},
		{
			name: "an unmatched member is not a problem, and the Machine not counted, while it has no providerID (as KCP)",
			in:   HealthInput{Snapshot: cluster(3), Machines: append(machines(2), Machine{Name: "m-new"})},
			want: metav1.ConditionTrue, reason: ClusterHealthyReason,
		},
		{
			name: "a Machine with a providerID waiting for its Node makes the cluster Unknown",
			in:   HealthInput{Snapshot: cluster(3), Machines: append(machines(2), Machine{Name: "m-new", ProviderID: "test://m-new"})},
			want: metav1.ConditionUnknown, reason: ClusterHealthUnknownReason,
			messageParts: []string{"Machine m-new: Waiting for a Node with spec.providerID test://m-new to exist"},
		},
		{
			name: "a member that never started is a cluster problem",
			in:   HealthInput{Snapshot: with(cluster(3), addMember(Member{ID: 0xab, IsLearner: true})), Machines: machines(3)},
			want: metav1.ConditionFalse, reason: ClusterNotHealthyReason,
			messageParts: []string{"Etcd member ab was added but never started"},
		},
		{
			name: "split brain is named at cluster level and on the split member",
			in:   HealthInput{Snapshot: with(cluster(3), evidence(3, func(e *MemberEvidence) { e.ClusterID = 0xbad })), Machines: machines(3)},
			want: metav1.ConditionFalse, reason: ClusterNotHealthyReason,
			messageParts: []string{"Members report different cluster IDs (split brain)", "Machine m-cp-2: Etcd member cp-2 reports cluster ID bad"},
		},
		{
			name: "member-list disagreement is named",
			in:   HealthInput{Snapshot: with(cluster(3), evidence(2, func(e *MemberEvidence) { e.Members = e.Members[:2] })), Machines: machines(3)},
			want: metav1.ConditionFalse, reason: ClusterNotHealthyReason,
			messageParts: []string{"Members disagree on the member list"},
		},
		{
			name: "no leader is named",
			in:   HealthInput{Snapshot: with(cluster(3), func(s *Snapshot) { s.LeaderID = 0 }), Machines: machines(3)},
			want: metav1.ConditionFalse, reason: ClusterNotHealthyReason,
			messageParts: []string{"Etcd has no leader"},
		},
		{
			name: "a member not answering makes the cluster NotHealthy",
			in:   HealthInput{Snapshot: with(cluster(3), evidence(2, unreachable("i/o timeout"))), Machines: machines(3)},
			want: metav1.ConditionFalse, reason: ClusterNotHealthyReason,
			messageParts: []string{"Machine m-cp-1: Etcd member cp-1 is not answering: i/o timeout"},
		},
		{
			name: "unknown member health makes the cluster HealthUnknown, not healthy",
			in:   HealthInput{Snapshot: with(cluster(3), evidence(2, func(e *MemberEvidence) { e.ObservedAt = testNow.Add(-time.Hour) })), Machines: machines(3)},
			want: metav1.ConditionUnknown, reason: ClusterHealthUnknownReason,
			messageParts: []string{"Machine m-cp-1: The last evidence"},
		},
		{
			name: "a deleting Machine does not make the cluster unhealthy",
			in:   HealthInput{Snapshot: cluster(3), Machines: deleting(machines(3), "m-cp-2")},
			want: metav1.ConditionTrue, reason: ClusterHealthyReason,
		},
		{
			name: "ConnectionDown when etcd cannot be reached",
			in:   HealthInput{ObserveErr: fmt.Errorf("%w: i/o timeout", ErrUnreachable), Machines: machines(3)},
			want: metav1.ConditionUnknown, reason: ClusterConnectionDownReason,
			messageParts: []string{"Failed to observe etcd: cannot reach etcd: i/o timeout"},
		},
		{
			name: "InspectionFailed when observation fails otherwise",
			in:   HealthInput{ObserveErr: errors.New("boom"), Machines: machines(3)},
			want: metav1.ConditionUnknown, reason: ClusterInspectionFailedReason,
			messageParts: []string{"Failed to observe etcd: boom"},
		},
		{
			name: "InspectionFailed, not a panic, when neither snapshot nor error is given",
			in:   HealthInput{Machines: machines(3)},
			want: metav1.ConditionUnknown, reason: ClusterInspectionFailedReason,
			messageParts: []string{"invalid input: no snapshot and no error given"},
		},
		{
			name: "a healthy verdict from a backend with blind spots names every check it did not make",
			in:   HealthInput{Snapshot: with(cluster(3), withoutLists, func(s *Snapshot) { s.Backend = "k3s" }), Machines: machines(3)},
			want: metav1.ConditionTrue, reason: ClusterHealthyReason,
			messageParts: []string{
				"Not checked by the k3s backend: ",
				"etcd members that no Node hosts (ghost members) are invisible to it",
				"whether members agree on the member list",
				"whether members agree on the cluster ID",
				"etcd alarms",
				"which member leads",
			},
		},
		{
			name: "an alarm on the cluster is a problem even when the member that raised it is gone",
			in: HealthInput{Snapshot: with(cluster(3), func(s *Snapshot) {
				s.Alarms = []ActiveAlarm{{MemberID: 0x77, Alarm: AlarmNoSpace}, {MemberID: 2, Alarm: AlarmCorrupt}}
			}), Machines: machines(3)},
			want: metav1.ConditionFalse, reason: ClusterNotHealthyReason,
			messageParts: []string{
				"Etcd alarm NOSPACE is active, raised by member 77, which is no longer a member",
				"Etcd alarm CORRUPT is active, raised by member cp-1",
				"Machine m-cp-1: Etcd member cp-1 reports alarms: CORRUPT",
			},
		},
		{
			name: "two members with one name are a problem that names both IDs and peer URLs",
			in:   HealthInput{Snapshot: with(cluster(3), sharedName), Machines: machines(3)},
			want: metav1.ConditionFalse, reason: ClusterNotHealthyReason,
			messageParts: []string{"Etcd members 3 (peer URLs https://10.0.0.3:2380) and 9 (peer URLs https://10.0.0.9:2380) share the name cp-2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tt.in.Now = testNow
			got := AssessHealth(tt.in).Cluster
			g.Expect(got.Type).To(Equal(ClusterHealthyCondition))
			g.Expect(got.Status).To(Equal(tt.want))
			g.Expect(got.Reason).To(Equal(tt.reason))
			if len(tt.messageParts) == 0 {
				g.Expect(got.Message).To(BeEmpty())
			}
			for _, part := range tt.messageParts {
				g.Expect(got.Message).To(ContainSubstring(part))
			}
		})
	}
}

func deleting(ms []Machine, name string) []Machine {
	for i := range ms {
		if ms[i].Name == name {
			ms[i].Deleting = true
		}
	}
	return ms
}

func TestConditionReasonFor(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ConditionReasonFor(fmt.Errorf("dial: %w", ErrUnreachable))).To(Equal(ClusterConnectionDownReason))
	g.Expect(ConditionReasonFor(fmt.Errorf("%w: no CA", ErrInvalidInput))).To(Equal(ClusterInspectionFailedReason))
	g.Expect(ConditionReasonFor(fmt.Errorf("%w: too few started", ErrRefused))).To(Equal(ClusterInspectionFailedReason))
	g.Expect(ConditionReasonFor(fmt.Errorf("%w: 5000 members", ErrTooLarge))).To(Equal(ClusterInputTooLargeReason))
}
