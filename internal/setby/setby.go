// Package setby says who set an annotation, from an object's managedFields, for the Warning
// Events that record a person's bypass of etcd-adapter's safety checks.
package setby

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotation says which field manager last set annotation key on obj, and when, from its
// managedFields: the object does not say which user set it (the apiserver's audit log does), but
// the field manager (kubectl-annotate, a controller's name) and the time lead there.
func Annotation(obj metav1.Object, key string) string {
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 == nil || !ownsAnnotation(e.FieldsV1.GetRawBytes(), key) {
			continue
		}
		at := "at an unrecorded time"
		if e.Time != nil {
			at = "at " + e.Time.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("annotation %s set by field manager %q (%s) %s", key, e.Manager, e.Operation, at)
	}
	return fmt.Sprintf("annotation %s set by no recorded field manager", key)
}

// ownsAnnotation reports whether a managedFields entry's fieldsV1 holds
// metadata.annotations[key] (the structured-merge-diff format: {"f:metadata":{"f:annotations":
// {"f:<key>":{}}}}).
func ownsAnnotation(raw []byte, key string) bool {
	var fields struct {
		Metadata struct {
			Annotations map[string]json.RawMessage `json:"f:annotations"`
		} `json:"f:metadata"`
	}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return false
	}
	_, ok := fields.Metadata.Annotations["f:"+key]
	return ok
}
