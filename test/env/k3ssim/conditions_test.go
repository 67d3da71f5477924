package k3ssim

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func Test_matchMember(t *testing.T) {
	members := []member{{ID: 1, Name: "cp-0-1a2b3c4d"}, {ID: 2, Name: ""}, {ID: 3, Name: "cp-10-0000ffff"}}
	node := func(name, annotation string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"etcd.k3s.cattle.io/node-name": annotation}}}
	}
	tests := []struct {
		name    string
		version string
		node    *corev1.Node
		wantID  uint64
	}{
		{"1.29.3+ matches the node-name annotation exactly", "v1.29.3+k3s1", node("cp-0", "cp-0-1a2b3c4d"), 1},
		{"1.29.3+ ignores a stale annotation even if the prefix fits", "v1.29.3+k3s1", node("cp-0", "cp-0-deadbeef"), 0},
		{"before 1.29.3 the member name prefix <node>- matches", "v1.29.2+k3s1", node("cp-0", "cp-0-deadbeef"), 1},
		{"before 1.29.3 cp-1 does not match cp-10-...", "v1.28.6+k3s1", node("cp-1", ""), 0},
		{"an unnamed learner matches nothing", "v1.33.4+k3s1", node("cp-2", ""), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m, found := matchMember(MustParseProfile(tt.version), tt.node, members)
			g.Expect(found).To(Equal(tt.wantID != 0))
			g.Expect(m.ID).To(Equal(tt.wantID))
		})
	}
}

func Test_desiredVoterCondition(t *testing.T) {
	voter := member{ID: 1, Name: "cp-0-1a2b3c4d"}
	learner := member{ID: 2, Name: "cp-1-1a2b3c4d", IsLearner: true}
	sick := errors.New("failed to check etcd member status: context deadline exceeded")
	tests := []struct {
		name       string
		version    string
		m          member
		found      bool
		health     error
		wantOK     bool
		wantStatus corev1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{"healthy voter", "v1.33.4+k3s1", voter, true, nil, true, corev1.ConditionTrue, ReasonMemberNotLearner, MessageMemberNotLearner},
		{"healthy learner", "v1.33.4+k3s1", learner, true, nil, true, corev1.ConditionFalse, ReasonMemberIsLearner, MessageMemberIsLearner},
		{"unhealthy wins over voter", "v1.33.4+k3s1", voter, true, sick, true, corev1.ConditionFalse, ReasonUnhealthy, sick.Error()},
		{"unhealthy wins over learner", "v1.33.4+k3s1", learner, true, sick, true, corev1.ConditionFalse, ReasonUnhealthy, sick.Error()},
		{"no member", "v1.33.4+k3s1", member{}, false, nil, true, corev1.ConditionFalse, ReasonNotAMember, MessageNotAMember},
		{"1.28.4 has no Unhealthy reason", "v1.28.4+k3s1", voter, true, sick, true, corev1.ConditionTrue, ReasonMemberNotLearner, MessageMemberNotLearner},
		{"1.28.4 writes nothing for a Node without member", "v1.28.4+k3s1", member{}, false, nil, false, "", "", ""},
		{"1.26.5 has no condition", "v1.26.5+k3s1", voter, true, nil, false, "", "", ""},
		{"RKE2 is the same", "v1.34.2+rke2r1", learner, true, nil, true, corev1.ConditionFalse, ReasonMemberIsLearner, MessageMemberIsLearner},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cond, ok := desiredVoterCondition(MustParseProfile(tt.version), tt.m, tt.found, tt.health)
			g.Expect(ok).To(Equal(tt.wantOK))
			if !ok {
				return
			}
			g.Expect(cond.Type).To(Equal(EtcdIsVoterCondition))
			g.Expect(cond.Status).To(Equal(tt.wantStatus))
			g.Expect(cond.Reason).To(Equal(tt.wantReason))
			g.Expect(cond.Message).To(Equal(tt.wantMsg))
		})
	}
}

func Test_conditionToWrite(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Hour))
	desired := corev1.NodeCondition{Type: EtcdIsVoterCondition, Status: corev1.ConditionTrue, Reason: ReasonMemberNotLearner, Message: MessageMemberNotLearner}
	existing := func(age time.Duration, status corev1.ConditionStatus, reason string) []corev1.NodeCondition {
		return []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			{Type: EtcdIsVoterCondition, Status: status, Reason: reason, Message: desired.Message,
				LastHeartbeatTime: metav1.NewTime(now.Add(-age)), LastTransitionTime: earlier},
		}
	}
	tests := []struct {
		name           string
		existing       []corev1.NodeCondition
		wantWrite      bool
		wantTransition metav1.Time
	}{
		{"a missing condition is written", nil, true, metav1.NewTime(now)},
		{"an unchanged condition with a fresh heartbeat is not re-written", existing(4*time.Minute, corev1.ConditionTrue, ReasonMemberNotLearner), false, metav1.Time{}},
		{"an unchanged condition is re-written after the heartbeat interval, keeping its transition time", existing(5*time.Minute, corev1.ConditionTrue, ReasonMemberNotLearner), true, earlier},
		{"a changed reason is written at once, status unchanged keeps the transition time", existing(time.Second, corev1.ConditionTrue, "Other"), true, earlier},
		{"a changed status is written at once with a new transition time", existing(time.Second, corev1.ConditionFalse, ReasonMemberIsLearner), true, metav1.NewTime(now)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cond, write := conditionToWrite(tt.existing, desired, now, DefaultHeartbeatInterval)
			g.Expect(write).To(Equal(tt.wantWrite))
			if !write {
				return
			}
			g.Expect(cond.LastHeartbeatTime.Time).To(Equal(now))
			g.Expect(cond.LastTransitionTime.Time).To(Equal(tt.wantTransition.Time))
		})
	}
}
