package controlplaneetcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	etcdfake "github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
)

// TestReconciler_removalEvents: every step of a Machine's removal flow is an Event on the
// Machine and the same Event, naming the Machine, on the ControlPlaneEtcd.
func TestReconciler_removalEvents(t *testing.T) {
	tests := []struct {
		name       string
		down       []int
		machine    int
		backend    *etcdfake.Cluster
		prepare    func(s *scope)
		wantType   string
		wantReason string
		wantText   string
		// released: the step's two Events are followed by the two of the hook's release, in
		// the same pass.
		released bool
	}{
		{name: "removing a healthy member next to a broken one is blocked", down: []int{1}, machine: 2, backend: &etcdfake.Cluster{},
			wantType: corev1.EventTypeWarning, wantReason: v1alpha1.EventMemberRemovalBlocked, wantText: "is not safe now"},
		{name: "leadership moves off the leaving leader", machine: 0,
			backend:  &etcdfake.Cluster{MoveLeaderResponse: etcd.LeaderMove{Outcome: etcd.LeaderMoved}},
			wantType: corev1.EventTypeNormal, wantReason: v1alpha1.EventLeaderMoved, wantText: "Moved etcd leadership from"},
		{name: "a failed leadership move says so", machine: 0,
			backend:  &etcdfake.Cluster{MoveLeaderError: errors.New("etcdserver: request timed out")},
			wantType: corev1.EventTypeWarning, wantReason: v1alpha1.EventLeaderMoveFailed, wantText: "request timed out"},
		{name: "a removal asked and not confirmed yet", machine: 1,
			backend:  &etcdfake.Cluster{RemoveMemberResponses: map[uint64]etcd.Removal{2: {State: etcd.RemovalInProgress, Reason: "waiting for K3s"}}},
			wantType: corev1.EventTypeNormal, wantReason: v1alpha1.EventMemberRemoving, wantText: "waiting for K3s"},
		{name: "a failed removal call says so", machine: 1, backend: &etcdfake.Cluster{RemoveMemberError: errors.New("connection refused")},
			wantType: corev1.EventTypeWarning, wantReason: v1alpha1.EventMemberRemovalFailed, wantText: "connection refused"},
		{name: "a removed member, then the release of its Machine's hook", machine: 1, backend: &etcdfake.Cluster{},
			wantType: corev1.EventTypeNormal, wantReason: v1alpha1.EventMemberRemoved, wantText: "Removed etcd member cp-1 (2) of Node cp-1", released: true},
		{name: "a removed member of a backend whose IDs are not etcd's (K3s) is named by name and Node, with no ID", machine: 1, backend: &etcdfake.Cluster{},
			prepare:  func(s *scope) { s.snapshot.SyntheticMemberIDs = true },
			wantType: corev1.EventTypeNormal, wantReason: v1alpha1.EventMemberRemoved, wantText: "Removed etcd member cp-1 of Node cp-1", released: true},
		{name: "a removal asked of a backend whose IDs are not etcd's (K3s) is named by name and Node, with no ID", machine: 1,
			backend:  &etcdfake.Cluster{RemoveMemberResponses: map[uint64]etcd.Removal{2: {State: etcd.RemovalInProgress, Reason: "waiting for K3s"}}},
			prepare:  func(s *scope) { s.snapshot.SyntheticMemberIDs = true },
			wantType: corev1.EventTypeNormal, wantReason: v1alpha1.EventMemberRemoving, wantText: "Removing etcd member cp-1 of Node cp-1: waiting for K3s"},
		{name: "a rejected removal keeps the hook", machine: 1,
			backend:  &etcdfake.Cluster{RemoveMemberResponses: map[uint64]etcd.Removal{2: {State: etcd.RemovalRejected, Reason: "unhealthy cluster"}}},
			wantType: corev1.EventTypeWarning, wantReason: v1alpha1.EventMemberRemovalRejected, wantText: "unhealthy cluster"},
		{name: "a removal waiting longer than the limit times out", machine: 1, backend: &etcdfake.Cluster{},
			prepare: func(s *scope) {
				s.cpe.Status.Removal = &v1alpha1.MemberRemovalStatus{Member: "cp-1", MemberID: "2", MachineName: "m-cp-1", NodeName: "cp-1",
					StartTime: metav1.Time{Time: now.Add(-2 * v1alpha1.DefaultMemberRemovalTimeout)}, Result: v1alpha1.RemovalInProgress}
			},
			wantType: corev1.EventTypeWarning, wantReason: v1alpha1.EventMemberRemovalTimedOut, wantText: "waited longer than"},
		{name: "the hook is released once the member is gone", machine: 1, backend: &etcdfake.Cluster{},
			prepare: func(s *scope) {
				s.snapshot.Members = append(s.snapshot.Members[:1], s.snapshot.Members[2:]...)
				s.snapshot.Evidence = append(s.snapshot.Evidence[:1], s.snapshot.Evidence[2:]...)
			},
			wantType: corev1.EventTypeNormal, wantReason: v1alpha1.EventHookReleased, wantText: "no etcd member belongs to Machine m-cp-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := testScope(3, tt.down...)
			s.cpe.Name, s.cpe.Namespace = "c", "ns"
			s.backend = tt.backend
			m := deleting(s.machines[tt.machine])
			if tt.prepare != nil {
				tt.prepare(s)
			}
			rec := &eventRecorder{}
			r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(eventScheme()).WithIndex(&v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, creation.ClusterNameOf).WithObjects(m, s.cpe).WithStatusSubresource(s.cpe).Build(), Recorder: rec}

			_, _ = r.reconcileDeletingMachine(context.Background(), s, m)

			if tt.released {
				g.Expect(rec.events).To(HaveLen(4), fmt.Sprint(rec.events))
				g.Expect(rec.events[2]).To(matchEvent(corev1.EventTypeNormal, v1alpha1.EventHookReleased, "Machine", m.Name))
				g.Expect(rec.events[3]).To(matchEvent(corev1.EventTypeNormal, v1alpha1.EventHookReleased, v1alpha1.ControlPlaneEtcdKind, "c"))
			} else {
				g.Expect(rec.events).To(HaveLen(2), fmt.Sprint(rec.events))
			}
			onMachine, onCPE := rec.events[0], rec.events[1]
			g.Expect(onMachine).To(matchEvent(tt.wantType, tt.wantReason, "Machine", m.Name))
			g.Expect(onMachine.Message).To(ContainSubstring(tt.wantText))
			g.Expect(onCPE).To(matchEvent(tt.wantType, tt.wantReason, v1alpha1.ControlPlaneEtcdKind, "c"))
			g.Expect(onCPE.Message).To(Equal("Machine " + m.Name + ": " + onMachine.Message))
		})
	}
}

// deleting makes m a Machine CAPI holds on the pre-terminate hook (drained, volumes detached).
func deleting(m *clusterv1.Machine) *clusterv1.Machine {
	m.Namespace = "ns"
	m.Finalizers = []string{clusterv1.MachineFinalizer}
	m.DeletionTimestamp = &metav1.Time{Time: now}
	m.Annotations = map[string]string{v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue}
	m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineDeletingCondition, Status: metav1.ConditionTrue,
		Reason: clusterv1.MachineDeletingWaitingForPreTerminateHookReason}}
	return m
}

func eventScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

type recordedEvent struct{ Type, Reason, Kind, Name, Message string }

// matchEvent matches an Event's type, reason and object.
func matchEvent(eventType, reason, kind, name string) OmegaMatcher {
	return WithTransform(func(e recordedEvent) string { return strings.Join([]string{e.Type, e.Reason, e.Kind, e.Name}, " ") },
		Equal(strings.Join([]string{eventType, reason, kind, name}, " ")))
}

// eventRecorder records Events with the kind and name of their object.
type eventRecorder struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (r *eventRecorder) Event(obj runtime.Object, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Note: the kind from the scheme, as the real recorder takes it.
	gvk, err := apiutil.GVKForObject(obj, eventScheme())
	if err != nil {
		panic(err)
	}
	r.events = append(r.events, recordedEvent{Type: eventType, Reason: reason, Kind: gvk.Kind, Name: obj.(client.Object).GetName(), Message: message})
}

func (r *eventRecorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	r.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

func (r *eventRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	r.Eventf(obj, eventType, reason, format, args...)
}
