package controlplaneetcd

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

func TestCheckClusterID(t *testing.T) {
	tests := []struct {
		name         string
		in           clusterIDInput
		wantRecord   string
		wantRefuse   bool
		wantAccepted bool
		wantStatus   metav1.ConditionStatus
		wantReason   string
		wantMessage  []string
	}{
		{name: "nothing observed, nothing recorded", in: clusterIDInput{},
			wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.ClusterIDNotObservedReason},
		{name: "nothing observed keeps what was recorded and refuses nothing", in: clusterIDInput{Recorded: "c1"},
			wantRecord: "c1", wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.ClusterIDNotObservedReason},
		{name: "the first cluster ID observed is recorded", in: clusterIDInput{Observed: "c1"},
			wantRecord: "c1", wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ClusterIDRecordedReason},
		{name: "the recorded cluster ID matches", in: clusterIDInput{Recorded: "c1", Observed: "c1"},
			wantRecord: "c1", wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ClusterIDMatchedReason},
		{name: "another cluster ID is refused, naming both and how to accept it",
			in:         clusterIDInput{Recorded: "c1", Observed: "d2", Object: "my-cluster"},
			wantRecord: "c1", wantRefuse: true, wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ClusterIDChangedReason,
			wantMessage: []string{"cluster ID d2, not c1", "annotate my-cluster " + v1alpha1.AcceptClusterIDAnnotation + "=d2"}},
		{name: "an annotation accepting another ID than the one observed accepts nothing",
			in:         clusterIDInput{Recorded: "c1", Observed: "d2", Accepted: "e3"},
			wantRecord: "c1", wantRefuse: true, wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ClusterIDChangedReason},
		{name: "an annotation saying true accepts nothing", in: clusterIDInput{Recorded: "c1", Observed: "d2", Accepted: "true"},
			wantRecord: "c1", wantRefuse: true, wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ClusterIDChangedReason},
		{name: "the annotation naming the observed ID accepts it", in: clusterIDInput{Recorded: "c1", Observed: "d2", Accepted: "d2"},
			wantRecord: "d2", wantAccepted: true, wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ClusterIDAcceptedReason,
			wantMessage: []string{"d2 accepted", "in place of c1"}},
		{name: "the accepted ID may be written as etcdctl or a person writes it", in: clusterIDInput{Recorded: "c1", Observed: "d2", Accepted: " 0x00D2 "},
			wantRecord: "d2", wantAccepted: true, wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ClusterIDAcceptedReason},
		{name: "an annotation left on once the ID matches does nothing", in: clusterIDInput{Recorded: "d2", Observed: "d2", Accepted: "d2"},
			wantRecord: "d2", wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ClusterIDMatchedReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			v := checkClusterID(tt.in)
			g.Expect(v.Record).To(Equal(tt.wantRecord))
			g.Expect(v.Refuse).To(Equal(tt.wantRefuse))
			g.Expect(v.Accepted).To(Equal(tt.wantAccepted))
			g.Expect(v.Condition.Type).To(Equal(v1alpha1.ClusterIDMatchedCondition))
			g.Expect(v.Condition.Status).To(Equal(tt.wantStatus))
			g.Expect(v.Condition.Reason).To(Equal(tt.wantReason))
			for _, want := range tt.wantMessage {
				g.Expect(v.Condition.Message).To(ContainSubstring(want))
			}
		})
	}
}
