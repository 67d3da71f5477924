package setby

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAnnotation(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	entry := func(manager, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &at,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	tests := []struct {
		name   string
		fields []metav1.ManagedFieldsEntry
		want   string
	}{
		{name: "the manager that owns the annotation is named, with the time",
			fields: []metav1.ManagedFieldsEntry{
				entry("manager", `{"f:metadata":{"f:annotations":{"f:other":{}}}}`),
				entry("kubectl-annotate", `{"f:metadata":{"f:annotations":{"f:example.com/key":{}}}}`)},
			want: `annotation example.com/key set by field manager "kubectl-annotate" (Update) at 2026-01-02T03:04:05Z`},
		{name: "no entry owns it", fields: []metav1.ManagedFieldsEntry{entry("manager", `{"f:spec":{}}`)},
			want: "annotation example.com/key set by no recorded field manager"},
		{name: "fields that are not JSON are skipped", fields: []metav1.ManagedFieldsEntry{entry("manager", `{`)},
			want: "annotation example.com/key set by no recorded field manager"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := &metav1.ObjectMeta{ManagedFields: tt.fields}
			g.Expect(Annotation(obj, "example.com/key")).To(Equal(tt.want))
		})
	}
}
