package provider_test

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/provider"
)

// recordingSink keeps what WriteConditions set, as a provider's v1beta1 writer would.
type recordingSink struct {
	machines     map[string]provider.Condition
	controlPlane *provider.Condition
}

func (r *recordingSink) SetMachineCondition(machine string, c provider.Condition) {
	if r.machines == nil {
		r.machines = map[string]provider.Condition{}
	}
	r.machines[machine] = c
}

func (r *recordingSink) SetControlPlaneCondition(c provider.Condition) { r.controlPlane = &c }

func TestWriteConditions(t *testing.T) {
	custom := provider.Names{ClusterCondition: "EtcdReady", ClusterHealthyReason: "Ready", ClusterUnhealthyReason: "NotReady",
		ClusterUnknownReason: "Unknown", ClusterInspectionFailedReason: "CannotConnect", MemberCondition: "MemberReady",
		MemberHealthyReason: "Ready", MemberUnhealthyReason: "NotReady", MemberInspectionFailedReason: "Unknown", MemberDeletingReason: "Going"}
	type want struct {
		status   metav1.ConditionStatus
		reason   string
		severity provider.Severity
	}
	tests := []struct {
		name      string
		names     provider.Names
		change    func(s *etcd.Snapshot, ms []etcd.Machine)
		observeOK bool
		machine   want // of m-cp-2
		cluster   want
	}{
		{"healthy, in KThreesControlPlane's names by default", provider.Names{}, nil, true,
			want{metav1.ConditionTrue, "", provider.SeverityNone},
			want{metav1.ConditionTrue, "", provider.SeverityNone}},
		{"a broken member is EtcdMemberUnhealthy with severity Error", provider.Names{}, func(s *etcd.Snapshot, _ []etcd.Machine) { breakMember(s, 2) }, true,
			want{metav1.ConditionFalse, "EtcdMemberUnhealthy", provider.SeverityError},
			want{metav1.ConditionFalse, "EtcdClusterUnhealthy", provider.SeverityError}},
		{"a member of unknown health is MemberInspectionFailed", provider.Names{}, func(s *etcd.Snapshot, _ []etcd.Machine) {
			s.Evidence[2].Contact, s.Evidence[2].Error = etcd.ContactUnknown, "no EtcdIsVoter condition"
		}, true,
			want{metav1.ConditionUnknown, "MemberInspectionFailed", provider.SeverityNone},
			want{metav1.ConditionUnknown, "EtcdClusterUnknown", provider.SeverityNone}},
		{"a deleting Machine is Deleting with severity Info", provider.Names{}, func(_ *etcd.Snapshot, ms []etcd.Machine) { ms[2].Deleting = true }, true,
			want{metav1.ConditionFalse, "Deleting", provider.SeverityInfo},
			want{metav1.ConditionTrue, "", provider.SeverityNone}},
		{"a failed observation is EtcdClusterInspectionFailed", provider.Names{}, nil, false,
			want{metav1.ConditionUnknown, "MemberInspectionFailed", provider.SeverityNone},
			want{metav1.ConditionUnknown, "EtcdClusterInspectionFailed", provider.SeverityNone}},
		{"a provider's own names", custom, func(s *etcd.Snapshot, _ []etcd.Machine) { breakMember(s, 2) }, true,
			want{metav1.ConditionFalse, "NotReady", provider.SeverityError},
			want{metav1.ConditionFalse, "NotReady", provider.SeverityError}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s, machines := healthyCluster(3)
			if tt.change != nil {
				tt.change(s, machines)
			}
			o := provider.Observation{Snapshot: s, Machines: machines, Now: now}
			if !tt.observeOK {
				o = provider.Observation{Err: errors.Join(etcd.ErrUnreachable), Machines: machines, Now: now}
			}
			sink := &recordingSink{}
			provider.WriteConditions(sink, tt.names, o)
			names := tt.names
			if names == (provider.Names{}) {
				names = provider.KThreesControlPlaneNames
			}
			g.Expect(sink.machines).To(HaveLen(3))
			got := sink.machines["m-cp-2"]
			g.Expect(got.Type).To(Equal(names.MemberCondition))
			g.Expect([]any{got.Status, got.Reason, got.Severity}).To(Equal([]any{tt.machine.status, tt.machine.reason, tt.machine.severity}), got.Message)
			g.Expect(sink.controlPlane).NotTo(BeNil())
			cp := *sink.controlPlane
			g.Expect(cp.Type).To(Equal(names.ClusterCondition))
			g.Expect([]any{cp.Status, cp.Reason, cp.Severity}).To(Equal([]any{tt.cluster.status, tt.cluster.reason, tt.cluster.severity}), cp.Message)
		})
	}
}
