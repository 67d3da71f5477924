package controlplaneetcd

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	etcdfake "github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
)

func Test_decideRetry(t *testing.T) {
	stoppedAs := func(res v1alpha1.RemovalResult) *v1alpha1.MemberRemovalStatus {
		rec := inProgress("cp-1", "2", "m-cp-1")
		rec.Result, rec.EndTime, rec.Message = res, &metav1.Time{Time: now}, "K3s refused"
		return rec
	}
	ended := func(res v1alpha1.RemovalResult) *v1alpha1.MemberRemovalStatus {
		rec := stoppedAs(res)
		rec.Message = "done"
		return rec
	}
	asked := retryFacts{Machine: "m-cp-1", Annotation: v1alpha1.AnnotationTrue, Deleting: true, Held: true}
	with := func(edit func(f *retryFacts)) retryFacts {
		f := asked
		edit(&f)
		return f
	}
	tests := []struct {
		name       string
		facts      retryFacts
		rec        *v1alpha1.MemberRemovalStatus
		wantAction retryAction
		wantWhy    string
	}{
		{"A Machine without the annotation asks nothing", with(func(f *retryFacts) { f.Annotation = "" }), stoppedAs(v1alpha1.RemovalRejected), retryNothing, ""},
		{"A value other than true asks nothing and is left alone", with(func(f *retryFacts) { f.Annotation = "false" }), stoppedAs(v1alpha1.RemovalRejected), retryNothing, ""},
		{"A rejected removal of the Machine is restarted", asked, stoppedAs(v1alpha1.RemovalRejected), retryRestart, "stopped as Rejected: K3s refused"},
		{"A timed-out removal of the Machine is restarted", asked, stoppedAs(v1alpha1.RemovalTimedOut), retryRestart, "stopped as TimedOut"},
		{"A Machine not being deleted has nothing to retry: the annotation is taken off", with(func(f *retryFacts) { f.Deleting = false }), nil, retryTakeOff, "is not being deleted"},
		{"A deleting Machine no hook of etcd-adapter holds has nothing to retry", with(func(f *retryFacts) { f.Held = false }), stoppedAs(v1alpha1.RemovalRejected), retryTakeOff, "not held by the etcd-adapter pre-terminate hook"},
		{"A removal in progress is not restarted: it goes on by itself", asked, inProgress("cp-1", "2", "m-cp-1"), retryTakeOff, "is InProgress, not stopped"},
		{"A removal that ended as Removed is not restarted", asked, ended(v1alpha1.RemovalRemoved), retryTakeOff, "ended as Removed"},
		{"A removal a person released is not restarted", asked, ended(v1alpha1.RemovalReleased), retryTakeOff, "ended as Released"},
		{"No removal recorded: the annotation is taken off (also right after a retry cleared the record)", asked, nil, retryTakeOff, "no stopped removal is recorded for Machine m-cp-1"},
		{"Another Machine's stopped removal is not this Machine's to retry", with(func(f *retryFacts) { f.Machine = "m-cp-2" }), stoppedAs(v1alpha1.RemovalRejected), retryTakeOff, "no stopped removal is recorded for Machine m-cp-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			v := decideRetry(tt.facts, tt.rec)
			g.Expect(v.Action).To(Equal(tt.wantAction))
			g.Expect(v.Why).To(ContainSubstring(tt.wantWhy))
		})
	}
}

// withdrawingBackend is a backend that withdraws removal requests (as K3s does), recording each.
type withdrawingBackend struct {
	*recordingBackend
	withdrawn   []etcd.Member
	withdrawErr error
}

func (b *withdrawingBackend) WithdrawRemoval(_ context.Context, m etcd.Member) error {
	b.withdrawn = append(b.withdrawn, m)
	return b.withdrawErr
}

// TestReconciler_retryRemoval: a stopped removal is restarted by the retry annotation, one change
// per pass, and the new attempt runs the removal flow from the start.
func TestReconciler_retryRemoval(t *testing.T) {
	rejected := func(s *scope) *clusterv1.Machine {
		// Labelled as Cluster API labels control-plane Machines: the retry re-reads them by list.
		s.cluster.Name = "c"
		for _, m := range s.machines {
			m.Labels = map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.MachineControlPlaneLabel: ""}
		}
		m := deleting(s.machines[1])
		m.Annotations[v1alpha1.RetryRemovalAnnotation] = v1alpha1.AnnotationTrue
		rec := inProgress("cp-1", "2", "m-cp-1")
		rec.StartTime = metav1.Time{Time: now.Add(-time.Hour)}
		rec.Result, rec.EndTime, rec.Message = v1alpha1.RemovalRejected, &metav1.Time{Time: now.Add(-time.Minute)}, "K3s refused"
		s.cpe.Status.Removal = rec
		return m
	}
	pass := func(g Gomega, run *flowRun, r *Reconciler) ctrl.Result {
		// As Reconcile does: the pass's Machines and ControlPlaneEtcd as stored.
		for _, m := range run.s.memberMachines() {
			g.Expect(run.client.Get(context.Background(), client.ObjectKeyFromObject(m), m)).To(Succeed())
		}
		g.Expect(run.client.Get(context.Background(), client.ObjectKeyFromObject(run.s.cpe), run.s.cpe)).To(Succeed())
		run.s.storedRemoval = run.s.cpe.Status.Removal.DeepCopy()
		run.s.requeueAfter, run.s.progressing = 0, nil
		result, err := r.reconcileRetries(context.Background(), run.s)
		g.Expect(err).NotTo(HaveOccurred())
		if result.IsZero() {
			result, err = r.reconcileDeletingMachines(context.Background(), run.s)
			g.Expect(err).NotTo(HaveOccurred())
		}
		return result
	}
	annotated := func(g Gomega, run *flowRun, m *clusterv1.Machine) bool {
		got := &clusterv1.Machine{}
		g.Expect(run.client.Get(context.Background(), client.ObjectKeyFromObject(m), got)).To(Succeed())
		_, ok := got.Annotations[v1alpha1.RetryRemovalAnnotation]
		return ok
	}

	t.Run("A rejected removal is cleared, then the annotation goes, then the member is removed on a new record", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		m := rejected(s)
		run := newFlowRun(t, s, &etcdfake.Cluster{})
		backend := &withdrawingBackend{recordingBackend: run.backend}
		s.backend = backend
		recorder := &eventRecorder{}
		r := &Reconciler{Client: run.client, Recorder: recorder}

		// Pass 1: the backend's leftovers are withdrawn and the stopped record is cleared; nothing else.
		g.Expect(pass(g, run, r)).NotTo(BeZero())
		g.Expect(backend.withdrawn).To(ConsistOf(HaveField("Name", "cp-1")))
		g.Expect(run.s.storedRemoval).To(BeNil())
		g.Expect(annotated(g, run, m)).To(BeTrue(), "the annotation is taken off only after the record is cleared")
		g.Expect(backend.RemovedMembers).To(BeEmpty())
		g.Expect(recorder.events).To(ContainElement(matchEvent("Normal", v1alpha1.EventMemberRemovalRetried, "Machine", "m-cp-1")))

		// Pass 2: the annotation goes; still no removal asked.
		g.Expect(pass(g, run, r)).NotTo(BeZero())
		g.Expect(annotated(g, run, m)).To(BeFalse())
		g.Expect(backend.RemovedMembers).To(BeEmpty())
		g.Expect(recorder.events).To(ContainElement(matchEvent("Normal", v1alpha1.EventRetryRemovalTakenOff, "Machine", "m-cp-1")))

		// Pass 3: the removal flow runs from the start, on a new record.
		pass(g, run, r)
		g.Expect(removedIDs(backend.Cluster)).To(Equal([]uint64{2}))
		g.Expect(backend.atRemoveOf).To(ConsistOf(HaveValue(And(HaveField("Result", v1alpha1.RemovalInProgress),
			HaveField("StartTime.Time", BeTemporally("==", now)), HaveField("EndTime", BeNil())))))
		g.Expect(backend.withdrawn).To(HaveLen(1), "the withdrawal happens once")
	})

	t.Run("A retry on an etcdadm etcd Machine (no control-plane label) is read back and carried out", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		m := rejected(s)
		s.cpe.Status.Removal.Result = v1alpha1.RemovalTimedOut
		for _, em := range s.machines {
			// As the etcdadm controller labels its etcd Machines (controllers/helpers.go EtcdLabelsForCluster).
			em.Labels = map[string]string{clusterv1.ClusterNameLabel: "c", backends.EtcdClusterLabel: "c-etcd"}
		}
		run := newFlowRun(t, s, &etcdfake.Cluster{})
		s.etcdadm, s.etcdMachines, s.machines = true, s.machines, nil
		r := &Reconciler{Client: run.client, Recorder: &eventRecorder{}}
		for range 3 {
			pass(g, run, r)
		}
		g.Expect(annotated(g, run, m)).To(BeFalse())
		g.Expect(removedIDs(run.backend.Cluster)).To(Equal([]uint64{2}), "the retried removal is asked")
		g.Expect(run.s.storedRemoval).To(HaveValue(And(HaveField("MachineName", "m-cp-1"), HaveField("StartTime.Time", BeTemporally("==", now)))))
	})

	t.Run("A retry of a timed-out removal starts a new clock: the new attempt does not time out at once", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		rejected(s)
		s.cpe.Status.Removal.Result = v1alpha1.RemovalTimedOut
		run := newFlowRun(t, s, &etcdfake.Cluster{RemoveMemberResponses: map[uint64]etcd.Removal{2: {State: etcd.RemovalInProgress, Reason: "waiting"}}})
		r := &Reconciler{Client: run.client, Recorder: &eventRecorder{}}
		for range 3 {
			pass(g, run, r)
		}
		g.Expect(run.s.storedRemoval).To(HaveValue(And(HaveField("Result", v1alpha1.RemovalInProgress), HaveField("StartTime.Time", BeTemporally("==", now)))))
		g.Expect(run.s.progressing).To(HaveValue(HaveField("Reason", v1alpha1.ProgressingMemberRemovalReason)))
	})

	t.Run("A withdrawal that fails keeps the stopped record and the annotation, for the next pass", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		m := rejected(s)
		run := newFlowRun(t, s, &etcdfake.Cluster{})
		s.backend = &withdrawingBackend{recordingBackend: run.backend, withdrawErr: errors.New("workload apiserver down")}
		r := &Reconciler{Client: run.client, Recorder: &eventRecorder{}}
		_, err := r.reconcileRetries(context.Background(), s)
		g.Expect(err).To(MatchError(ContainSubstring("workload apiserver down")))
		g.Expect(run.s.storedRemoval).To(HaveValue(HaveField("Result", v1alpha1.RemovalRejected)))
		g.Expect(annotated(g, run, m)).To(BeTrue())
	})

	t.Run("Without an observation the retry waits and the removal stays stopped", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		m := rejected(s)
		run := newFlowRun(t, s, &etcdfake.Cluster{})
		s.snapshot, s.observeErr = nil, errors.New("unreachable")
		r := &Reconciler{Client: run.client, Recorder: &eventRecorder{}}
		result, err := r.reconcileRetries(context.Background(), s)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(result.IsZero()).To(BeTrue(), "no change was made, so the other Machines' flows run")
		g.Expect(run.s.storedRemoval).To(HaveValue(HaveField("Result", v1alpha1.RemovalRejected)))
		g.Expect(annotated(g, run, m)).To(BeTrue())
	})

	t.Run("A cache that still shows an annotation already taken off restarts nothing", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		m := rejected(s)
		delete(m.Annotations, v1alpha1.RetryRemovalAnnotation)
		run := newFlowRun(t, s, &etcdfake.Cluster{})
		backend := &withdrawingBackend{recordingBackend: run.backend}
		s.backend = backend
		// The pass's Machine is the cache's, which has not seen the annotation go.
		m.Annotations[v1alpha1.RetryRemovalAnnotation] = v1alpha1.AnnotationTrue
		r := &Reconciler{Client: run.client, Recorder: &eventRecorder{}}
		_, err := r.reconcileRetries(context.Background(), s)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(backend.withdrawn).To(BeEmpty())
		g.Expect(run.s.storedRemoval).To(HaveValue(HaveField("Result", v1alpha1.RemovalRejected)))
	})

	t.Run("The annotation on a Machine whose removal ended is taken off and nothing is removed", func(t *testing.T) {
		g := NewWithT(t)
		s := testScope(3)
		m := rejected(s)
		s.cpe.Status.Removal.Result = v1alpha1.RemovalRemoved
		run := newFlowRun(t, s, &etcdfake.Cluster{})
		recorder := &eventRecorder{}
		r := &Reconciler{Client: run.client, Recorder: recorder}
		g.Expect(pass(g, run, r)).NotTo(BeZero())
		g.Expect(annotated(g, run, m)).To(BeFalse())
		g.Expect(run.s.storedRemoval).To(HaveValue(HaveField("Result", v1alpha1.RemovalRemoved)))
		g.Expect(recorder.events).To(ContainElement(matchEvent("Normal", v1alpha1.EventRetryRemovalTakenOff, "Machine", "m-cp-1")))
		g.Expect(recorder.events).NotTo(ContainElement(matchEvent("Normal", v1alpha1.EventMemberRemovalRetried, "Machine", "m-cp-1")))
	})
}
