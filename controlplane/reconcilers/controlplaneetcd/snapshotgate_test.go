package controlplaneetcd

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

func Test_decideSnapshotGate(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	spec := &v1alpha1.SnapshotSpec{MaxAge: &metav1.Duration{Duration: 10 * time.Minute}, WaitTimeout: &metav1.Duration{Duration: 30 * time.Minute}}
	taken := func(ago time.Duration) *v1alpha1.SnapshotRecord {
		return &v1alpha1.SnapshotRecord{Key: "ns/c/x.db", Revision: 7, Size: 4096, Time: metav1.NewTime(now.Add(-ago))}
	}
	since := func(ago time.Duration) *time.Time { t := now.Add(-ago); return &t }
	tests := []struct {
		name       string
		in         snapshotGateInput
		want       snapshotVerdict
		wantReason string
	}{
		{name: "Not opted in: the removal goes on without a snapshot", in: snapshotGateInput{Now: now, CanTake: true}, want: snapshotNotRequired},
		{name: "A snapshot taken within maxAge precedes the removal", in: snapshotGateInput{Spec: spec, Last: taken(9 * time.Minute), Now: now, CanTake: true}, want: snapshotFresh},
		{name: "A snapshot taken exactly maxAge ago still counts", in: snapshotGateInput{Spec: spec, Last: taken(10 * time.Minute), Now: now, CanTake: true}, want: snapshotFresh},
		{name: "A snapshot older than maxAge does not count: take one", in: snapshotGateInput{Spec: spec, Last: taken(11 * time.Minute), Now: now, CanTake: true}, want: snapshotTake, wantReason: v1alpha1.ProgressingWaitingForSnapshotReason},
		{name: "A snapshot from the future (clock moved back) does not count", in: snapshotGateInput{Spec: spec, Last: taken(-time.Minute), Now: now, CanTake: true}, want: snapshotTake, wantReason: v1alpha1.ProgressingWaitingForSnapshotReason},
		{name: "No snapshot yet: take one", in: snapshotGateInput{Spec: spec, Now: now, CanTake: true}, want: snapshotTake, wantReason: v1alpha1.ProgressingWaitingForSnapshotReason},
		{name: "The default maxAge (10m) applies when unset", in: snapshotGateInput{Spec: &v1alpha1.SnapshotSpec{}, Last: taken(11 * time.Minute), Now: now, CanTake: true}, want: snapshotTake, wantReason: v1alpha1.ProgressingWaitingForSnapshotReason},
		{name: "A backend that takes its own snapshots (K3s) waits instead of taking one", in: snapshotGateInput{Spec: spec, Now: now}, want: snapshotWait, wantReason: v1alpha1.ProgressingWaitingForSnapshotReason},
		{name: "Waiting longer than waitTimeout says so and still waits", in: snapshotGateInput{Spec: spec, Now: now, CanTake: true, WaitingSince: since(31 * time.Minute)}, want: snapshotTake, wantReason: v1alpha1.ProgressingSnapshotWaitExceededReason},
		{name: "Waiting less than waitTimeout is a plain wait", in: snapshotGateInput{Spec: spec, Now: now, CanTake: true, WaitingSince: since(29 * time.Minute)}, want: snapshotTake, wantReason: v1alpha1.ProgressingWaitingForSnapshotReason},
		{name: "A failed attempt less than the retry interval ago waits without a new attempt", in: snapshotGateInput{Spec: spec, Now: now, CanTake: true, LastFailure: since(5 * time.Second), RetryInterval: 15 * time.Second}, want: snapshotRetryLater, wantReason: v1alpha1.ProgressingWaitingForSnapshotReason},
		{name: "A failed attempt longer than the retry interval ago is retried", in: snapshotGateInput{Spec: spec, Now: now, CanTake: true, LastFailure: since(16 * time.Second), RetryInterval: 15 * time.Second}, want: snapshotTake, wantReason: v1alpha1.ProgressingWaitingForSnapshotReason},
		{name: "The annotation lets the removal go on without a fresh snapshot", in: snapshotGateInput{Spec: spec, Last: taken(time.Hour), Now: now, Overridden: true}, want: snapshotOverridden},
		{name: "The annotation is not needed when a fresh snapshot exists", in: snapshotGateInput{Spec: spec, Last: taken(time.Minute), Now: now, Overridden: true}, want: snapshotFresh},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := decideSnapshotGate(tt.in)
			g.Expect(got.Verdict).To(Equal(tt.want))
			g.Expect(got.Reason).To(Equal(tt.wantReason))
			g.Expect(got.goesOn()).To(Equal(tt.want == snapshotNotRequired || tt.want == snapshotFresh || tt.want == snapshotOverridden))
			if !got.goesOn() {
				g.Expect(got.Message).To(ContainSubstring(v1alpha1.RemoveWithoutSnapshotAnnotation))
			}
		})
	}
}
