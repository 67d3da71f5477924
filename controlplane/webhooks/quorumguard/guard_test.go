package quorumguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	etcdfake "github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
)

// TestGuard_events: every refusal, and every deletion let through with a warning, is recorded
// as a Warning Event with a reason from api/v1alpha1 and the client's message, on the Machine and
// on the ControlPlaneEtcd; a plain allow and a dry run record none.
func TestGuard_events(t *testing.T) {
	tests := []struct {
		name        string
		snapshot    func() *etcd.Snapshot
		observeErr  error
		status      *v1alpha1.ControlPlaneEtcdStatus
		skip        bool
		dryRun      bool
		wantAllowed bool
		wantReason  string
		wantMessage string
	}{
		{name: "deleting a healthy member's Machine next to a broken member is refused, with an Event",
			snapshot: func() *etcd.Snapshot { return broken(healthy(3), 1) }, wantReason: v1alpha1.EventDeletionRefused,
			wantMessage: "deleting Machine m-cp-0 would lose etcd quorum of Cluster c"},
		{name: "a dry-run refusal records nothing",
			snapshot: func() *etcd.Snapshot { return broken(healthy(3), 1) }, dryRun: true},
		{name: "etcd that cannot be observed lets the deletion through with a warning and an Event",
			observeErr: fmt.Errorf("%w: connection refused", etcd.ErrUnreachable), wantAllowed: true,
			wantReason: v1alpha1.EventDeletionAllowedEtcdUnobserved, wantMessage: "etcd of Cluster c could not be observed"},
		{name: "etcd that cannot be observed, last observed with every member healthy, lets the deletion through with a warning and an Event",
			observeErr: fmt.Errorf("%w: connection refused", etcd.ErrUnreachable), status: ptr.To(recorded(3, v1alpha1.MemberUnknown)), wantAllowed: true,
			wantReason: v1alpha1.EventDeletionAllowedEtcdUnobserved, wantMessage: "keeps etcd quorum only as etcd was last observed"},
		{name: "etcd that cannot be observed, last observed with another member unhealthy, is refused, with an Event",
			observeErr: fmt.Errorf("%w: connection refused", etcd.ErrUnreachable),
			status:     ptr.To(withUnhealthySince(recorded(3, v1alpha1.MemberUnknown), "m-cp-2", metav1.Now())), wantReason: v1alpha1.EventDeletionRefusedHealthUnknown,
			wantMessage: "deleting Machine m-cp-0 of Cluster c cannot be shown to keep etcd quorum (HealthUnknown): etcd could not be observed (cannot reach etcd: connection refused)"},
		{name: "the last member of a Cluster that is not being deleted is refused, with an Event",
			snapshot:   func() *etcd.Snapshot { return healthy(1) },
			wantReason: v1alpha1.EventDeletionRefusedLastMember, wantMessage: "deleting Machine m-cp-0 would remove the last etcd member of Cluster c (LastMember)"},
		{name: "every member's health unknown is refused with a message that says unknown, not lost",
			snapshot: func() *etcd.Snapshot { return stale(healthy(3)) }, wantReason: v1alpha1.EventDeletionRefusedHealthUnknown,
			wantMessage: "deleting Machine m-cp-0 of Cluster c cannot be shown to keep etcd quorum (HealthUnknown): whether etcd has quorum is unknown: 0 of 3 voters are healthy (the health of 3 is unknown)"},
		{name: "the skip annotation lets the deletion through unchecked, with a warning and an Event",
			snapshot: func() *etcd.Snapshot { return broken(healthy(3), 1) }, skip: true, wantAllowed: true,
			wantReason: v1alpha1.EventQuorumGuardSkipped, wantMessage: "etcd quorum guard skipped for Machine m-cp-0"},
		{name: "a safe deletion is allowed with no Event",
			snapshot: func() *etcd.Snapshot { return healthy(3) }, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			backend := &etcdfake.Cluster{ObserveError: tt.observeErr}
			if tt.snapshot != nil {
				backend.ObserveResponse = tt.snapshot()
			}
			rec := &recorder{}
			guard := newGuard(backend, rec)
			if tt.status != nil {
				cpe := &v1alpha1.ControlPlaneEtcd{}
				g.Expect(guard.Client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "c"}, cpe)).To(Succeed())
				cpe.Status = *tt.status
				g.Expect(guard.Writer.(client.Client).Update(context.Background(), cpe)).To(Succeed())
			}
			m := machine("m-cp-0", "cp-0", tt.skip)

			resp := guard.Handle(context.Background(), deleteRequest(g, m, tt.dryRun))

			g.Expect(resp.Allowed).To(Equal(tt.wantAllowed))
			if tt.wantReason == "" {
				g.Expect(rec.events).To(BeEmpty())
				return
			}
			msg := resp.Warnings
			if !resp.Allowed {
				msg = []string{resp.Result.Message}
			}
			g.Expect(msg).To(ConsistOf(ContainSubstring(tt.wantMessage)))
			g.Expect(rec.events).To(ConsistOf(
				event{Kind: "Machine", Name: "m-cp-0", Type: corev1.EventTypeWarning, Reason: tt.wantReason, Message: msg[0]},
				event{Kind: v1alpha1.ControlPlaneEtcdKind, Name: "c", Type: corev1.EventTypeWarning, Reason: tt.wantReason, Message: msg[0]},
			))
		})
	}
}

// TestGuard_noControlPlaneEtcd: a Cluster without a ControlPlaneEtcd is not guarded, and nothing
// is recorded.
func TestGuard_noControlPlaneEtcd(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	guard := newGuard(&etcdfake.Cluster{ObserveResponse: broken(healthy(3), 1)}, rec)
	guard.Client = fake.NewClientBuilder().WithScheme(testScheme()).WithIndex(&v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, creation.ClusterNameOf).WithObjects(cluster()).Build()
	resp := guard.Handle(context.Background(), deleteRequest(g, machine("m-cp-0", "cp-0", false), false))
	g.Expect(resp.Allowed).To(BeTrue())
	g.Expect(resp.Warnings).To(BeEmpty())
	g.Expect(rec.events).To(BeEmpty())
}

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	utilruntime.Must(controlplanev1.AddToScheme(s))
	return s
}

func cluster() *clusterv1.Cluster {
	return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
}

func newGuard(backend etcd.Cluster, rec *recorder) *Guard {
	cpe := &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c", Backend: v1alpha1.BackendK3s, Mode: v1alpha1.ModeManage},
	}
	// Note: three control-plane Machines, as the Cluster has when the guard is asked.
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithIndex(&v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, creation.ClusterNameOf).WithObjects(cluster(), cpe,
		machine("m-cp-0", "cp-0", false), machine("m-cp-1", "cp-1", false), machine("m-cp-2", "cp-2", false)).Build()
	return &Guard{
		Client:     c,
		APIReader:  c,
		Writer:     c,
		RESTMapper: restMapper(),
		Backends:   staticBackend{backend},
		Recorder:   rec,
		decoder:    admission.NewDecoder(testScheme()),
	}
}

// restMapper knows KubeadmControlPlane, the control-plane kind of the tests' Clusters.
func restMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{controlplanev1.GroupVersion})
	m.Add(controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"), meta.RESTScopeNamespace)
	return m
}

// machine is a control-plane Machine of Cluster c on the Node, held by etcd-adapter's hook (the
// tests' ControlPlaneEtcd is in mode Manage), so its member is removed before it goes.
func machine(name, node string, skip bool) *clusterv1.Machine {
	m := &clusterv1.Machine{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels:      map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.MachineControlPlaneLabel: ""},
			Annotations: map[string]string{v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue}},
		Spec:   clusterv1.MachineSpec{ClusterName: "c"},
		Status: clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: node}},
	}
	if skip {
		m.Annotations[v1alpha1.SkipQuorumGuardAnnotation] = "true"
	}
	return m
}

func deleteRequest(g Gomega, m *clusterv1.Machine, dryRun bool) admission.Request {
	raw, err := json.Marshal(m)
	g.Expect(err).NotTo(HaveOccurred())
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Delete, Namespace: m.Namespace, Name: m.Name,
		OldObject: runtime.RawExtension{Raw: raw}, DryRun: &dryRun,
	}}
}

// healthy is n voters on Nodes cp-0.., each answering now with the same view, cp-0 leading.
func healthy(n int) *etcd.Snapshot {
	now := time.Now()
	s := &etcd.Snapshot{Backend: "test", ObservedAt: now, LeaderID: 1}
	for i := range n {
		node := fmt.Sprintf("cp-%d", i)
		s.Members = append(s.Members, etcd.Member{ID: uint64(i + 1), Name: node, NodeName: node})
	}
	for _, m := range s.Members {
		s.Evidence = append(s.Evidence, etcd.MemberEvidence{MemberID: m.ID, NodeName: m.NodeName, Contact: etcd.ContactAnswered,
			ObservedAt: now, ClusterID: 0xc1, Members: s.Members, LeaderID: s.LeaderID})
	}
	return s
}

// stale makes every member's evidence older than it can be trusted, as when every K3s heartbeat
// is stale.
func stale(s *etcd.Snapshot) *etcd.Snapshot {
	for i := range s.Evidence {
		s.Evidence[i].ObservedAt = s.ObservedAt.Add(-time.Hour)
	}
	return s
}

// broken makes the i-th member stop answering.
func broken(s *etcd.Snapshot, i int) *etcd.Snapshot {
	s.Evidence[i] = etcd.MemberEvidence{MemberID: s.Members[i].ID, NodeName: s.Members[i].NodeName,
		Contact: etcd.ContactUnreachable, Error: "connection refused", ObservedAt: s.ObservedAt}
	return s
}

type staticBackend struct{ c etcd.Cluster }

func (b staticBackend) For(context.Context, *clusterv1.Cluster, v1alpha1.Backend) (etcd.Cluster, error) {
	if b.c == nil {
		return nil, errors.New("no backend")
	}
	return b.c, nil
}

type event struct{ Kind, Name, Type, Reason, Message string }

// recorder records Events with the object they are on.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) Event(obj runtime.Object, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Note: the kind from the scheme, as the real recorder takes it (objects read through a client
	// carry no TypeMeta).
	gvk, err := apiutil.GVKForObject(obj, testScheme())
	if err != nil {
		panic(err)
	}
	r.events = append(r.events, event{Kind: gvk.Kind, Name: obj.(client.Object).GetName(), Type: eventType, Reason: reason, Message: message})
}

func (r *recorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	r.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

func (r *recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	r.Eventf(obj, eventType, reason, format, args...)
}

// TestGuard_externalEtcd: an external etcd's members run on no control-plane Machine, so the
// guard lets every control-plane Machine deletion through, unchecked and unrecorded, even when
// a member's name or address would tie it to the Machine and etcd is broken or unobservable.
func TestGuard_externalEtcd(t *testing.T) {
	tests := []struct {
		name       string
		snapshot   func() *etcd.Snapshot
		observeErr error
		machines   []string
	}{
		{name: "A broken external etcd whose members are named after the Machines' Nodes does not block a deletion",
			snapshot: func() *etcd.Snapshot { return broken(healthy(3), 1) }, machines: []string{"cp-0", "cp-1", "cp-2"}},
		{name: "An external etcd whose only member is named after the Machine's Node does not block a deletion",
			snapshot: func() *etcd.Snapshot { return healthy(1) }, machines: []string{"cp-0"}},
		{name: "An unobservable external etcd does not block the deletion of the last control-plane Machine",
			observeErr: fmt.Errorf("%w: connection refused", etcd.ErrUnreachable), machines: []string{"cp-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			backend := &etcdfake.Cluster{ObserveError: tt.observeErr}
			if tt.snapshot != nil {
				backend.ObserveResponse = tt.snapshot()
			}
			rec := &recorder{}
			guard := newGuard(backend, rec)
			cpe := &v1alpha1.ControlPlaneEtcd{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
				Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c", Backend: v1alpha1.BackendExternal, Mode: v1alpha1.ModeObserve},
			}
			objs := []client.Object{cluster(), cpe}
			for _, node := range tt.machines {
				objs = append(objs, machine("m-"+node, node, false))
			}
			c := fake.NewClientBuilder().WithScheme(testScheme()).WithIndex(&v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, creation.ClusterNameOf).WithObjects(objs...).Build()
			guard.Client, guard.APIReader, guard.Writer = c, c, c

			resp := guard.Handle(context.Background(), deleteRequest(g, machine("m-cp-0", "cp-0", false), false))

			g.Expect(resp.Allowed).To(BeTrue())
			g.Expect(resp.Warnings).To(BeEmpty())
			g.Expect(rec.events).To(BeEmpty())
		})
	}
}
