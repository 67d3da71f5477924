package v1alpha1

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestControlPlaneEtcdSpec_ObservationIntervalOr(t *testing.T) {
	tests := []struct {
		name           string
		spec           *metav1.Duration
		managerDefault time.Duration
		want           time.Duration
	}{
		{name: "the spec wins over the manager's default", spec: &metav1.Duration{Duration: 5 * time.Second}, managerDefault: time.Minute, want: 5 * time.Second},
		{name: "unset, the manager's default", managerDefault: time.Minute, want: time.Minute},
		{name: "a zero spec counts as unset", spec: &metav1.Duration{}, managerDefault: time.Minute, want: time.Minute},
		{name: "unset with no manager default, the API's default", want: DefaultObservationInterval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := ControlPlaneEtcdSpec{ObservationInterval: tt.spec}
			g.Expect(s.ObservationIntervalOr(tt.managerDefault)).To(Equal(tt.want))
		})
	}
}
