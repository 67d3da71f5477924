package controlplaneetcd

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/pkg/snapshotstore"
)

const (
	// snapshotRetryInterval re-tries a snapshot that failed (a bucket that is down, a member
	// that did not answer), and re-checks a removal that waits for one K3s takes.
	snapshotRetryInterval = 15 * time.Second
	// DefaultSnapshotTimeout bounds one snapshot's stream, verification and upload; a
	// Reconciler's SnapshotTimeout overrides it.
	DefaultSnapshotTimeout = 15 * time.Minute
)

// snapshotBefore gates the removal of a member of Machine m (nil for a ghost, which has no
// Machine to annotate) on spec.snapshot (decideSnapshotGate): it reports true when the removal
// goes on, with the snapshot that precedes it (nil when none is required or a person
// overrode it). Otherwise the removal waits this pass, and the outcome says why; when
// etcd-adapter can take the snapshot itself (kubeadm, external), it takes one in this pass, the
// pass's one change.
func (r *Reconciler) snapshotBefore(ctx context.Context, s *scope, m *clusterv1.Machine, removedNode string) (*v1alpha1.SnapshotRecord, outcome, bool) {
	st := s.cpe.Status.Snapshot
	if st == nil {
		st = &v1alpha1.SnapshotStatus{}
	}
	in := snapshotGateInput{Spec: s.cpe.Spec.Snapshot, Last: st.Last, Now: s.now}
	_, in.CanTake = s.backend.(etcd.DatabaseSnapshotter)
	in.Overridden = m != nil && m.Annotations[v1alpha1.RemoveWithoutSnapshotAnnotation] == v1alpha1.AnnotationTrue
	if st.WaitingSince != nil {
		in.WaitingSince = &st.WaitingSince.Time
	}
	if st.LastFailureTime != nil {
		in.LastFailure, in.RetryInterval = &st.LastFailureTime.Time, snapshotRetryInterval
	}
	var k3sWhy string
	if !in.CanTake && in.Spec != nil {
		// K3s and RKE2 take their own snapshots: the newest that may precede this removal is
		// looked up afresh each pass, since it depends on the Node being removed.
		in.Last, k3sWhy = r.k3sSnapshotFor(ctx, s, removedNode)
		st.Last = in.Last
	}
	gate := decideSnapshotGate(in)
	if k3sWhy != "" {
		gate.Message = k3sWhy + "; " + gate.Message
	}
	log := ctrl.LoggerFrom(ctx)
	log.V(2).Info("Snapshot gate for member removal", "verdict", gate.Verdict, "reason", gate.Reason)
	if gate.goesOn() {
		if in.Spec != nil {
			st.WaitingSince = nil
			s.cpe.Status.Snapshot = st
		}
		if gate.Verdict == snapshotOverridden {
			r.event(s, m, corev1.EventTypeWarning, v1alpha1.EventRemovedWithoutSnapshot, "Member removal goes on without a verified etcd snapshot: "+gate.Message)
			return nil, outcome{}, true
		}
		return st.Last.DeepCopy(), outcome{}, true
	}
	if st.WaitingSince == nil {
		st.WaitingSince = &metav1.Time{Time: s.now}
	}
	s.cpe.Status.Snapshot = st
	if gate.Reason == v1alpha1.ProgressingSnapshotWaitExceededReason {
		r.eventFor(s, m, corev1.EventTypeWarning, v1alpha1.EventSnapshotWaitExceeded, "Member removal waits: "+gate.Message)
	}
	switch gate.Verdict {
	case snapshotWait:
		return nil, waiting(gate.Reason, "Member removal waits: "+gate.Message).after(snapshotRetryInterval), false
	case snapshotRetryLater:
		next := st.LastFailureTime.Add(snapshotRetryInterval).Sub(s.now)
		return nil, waiting(gate.Reason, fmt.Sprintf("Member removal waits: %s; the last attempt failed: %s", gate.Message, st.LastError)).after(max(next, time.Second)), false
	}
	saved, err := r.takeSnapshot(ctx, s)
	if err != nil {
		st.LastError, st.LastFailureTime = etcd.SanitizeText(err.Error(), etcd.MaxTextBytes), &metav1.Time{Time: r.now()}
		msg := fmt.Sprintf("Member removal waits: %s; the last attempt failed: %s", gate.Message, st.LastError)
		r.eventFor(s, m, corev1.EventTypeWarning, v1alpha1.EventSnapshotFailed, msg)
		log.Info("Snapshot before member removal failed", "err", err.Error())
		return nil, waiting(gate.Reason, msg).after(snapshotRetryInterval), false
	}
	st.Last, st.LastError, st.LastFailureTime = saved, "", nil
	msg := fmt.Sprintf("Took verified etcd snapshot %s (revision %d, %d bytes; checked %s) before a member removal", saved.Key, saved.Revision, saved.Size, saved.Verified)
	r.eventFor(s, m, corev1.EventTypeNormal, v1alpha1.EventSnapshotTaken, msg)
	return nil, acted(v1alpha1.ProgressingWaitingForSnapshotReason, msg).after(confirmRequeueAfter), false
}

// k3sSnapshotFor is the newest ETCDSnapshotFile of the workload cluster that may precede the
// removal of the member on removedNode (chooseK3sSnapshot), or why there is none.
func (r *Reconciler) k3sSnapshotFor(ctx context.Context, s *scope, removedNode string) (*v1alpha1.SnapshotRecord, string) {
	if r.ClusterCache == nil {
		return nil, "the workload cluster cannot be read"
	}
	c, err := r.ClusterCache.GetClient(ctx, client.ObjectKeyFromObject(s.cluster))
	if err != nil {
		return nil, fmt.Sprintf("the workload cluster cannot be read to list ETCDSnapshotFiles: %v", err)
	}
	files, err := k3s.ListSnapshotFiles(ctx, c)
	if err != nil {
		return nil, etcd.SanitizeText(err.Error(), etcd.MaxTextBytes)
	}
	f, why := k3s.ChooseSnapshot(files, removedNode, s.now, s.cpe.Spec.Snapshot.MaxAgeOrDefault())
	if f == nil {
		return nil, why
	}
	return &v1alpha1.SnapshotRecord{Key: fmt.Sprintf("ETCDSnapshotFile %s (%s)", f.Name, f.Location), Size: f.Size,
		Time: metav1.NewTime(f.CreationTime), Verified: "readyToUse"}, ""
}

// eventFor records an Event on Machine m and the ControlPlaneEtcd, or on the ControlPlaneEtcd
// alone for a ghost (m nil).
func (r *Reconciler) eventFor(s *scope, m *clusterv1.Machine, eventType, reason, msg string) {
	if m != nil {
		r.event(s, m, eventType, reason, msg)
		return
	}
	r.Recorder.Event(s.cpe, eventType, reason, msg)
}

// takeSnapshot streams a member's database to spec.snapshot's bucket, verifies it and prunes the
// Cluster's snapshots to spec.snapshot.retain.
func (r *Reconciler) takeSnapshot(ctx context.Context, s *scope) (*v1alpha1.SnapshotRecord, error) {
	spec := s.cpe.Spec.Snapshot
	store, err := r.snapshotStore(ctx, s.cpe.Namespace, spec)
	if err != nil {
		return nil, err
	}
	timeout := r.SnapshotTimeout
	if timeout <= 0 {
		timeout = DefaultSnapshotTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	db, err := s.backend.(etcd.DatabaseSnapshotter).SnapshotDatabase(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to open an etcd snapshot stream: %w", err)
	}
	cluster := types.NamespacedName{Namespace: s.cpe.Namespace, Name: s.cluster.Name}
	saved, err := store.Save(ctx, cluster, db, r.now())
	if err != nil {
		return nil, err
	}
	if _, err := store.Prune(ctx, cluster, spec.RetainOrDefault()); err != nil {
		// The snapshot is verified and stored; an old one left behind is the next Prune's.
		ctrl.LoggerFrom(ctx).Info("Pruning old etcd snapshots failed", "err", err.Error())
	}
	return &v1alpha1.SnapshotRecord{Key: saved.Key, Revision: saved.Revision, Size: saved.Size, Time: metav1.NewTime(saved.Time), Verified: strings.Join(saved.Verified, ", ")}, nil
}

// snapshotStore is the Store of spec, with the credentials of its Secret read uncached (get
// only, like the other Secrets the manager reads).
func (r *Reconciler) snapshotStore(ctx context.Context, namespace string, spec *v1alpha1.SnapshotSpec) (*snapshotstore.Store, error) {
	if spec.CredentialsSecretRef == nil || spec.CredentialsSecretRef.Name == "" {
		return nil, fmt.Errorf("%w: spec.snapshot.credentialsSecretRef is not set", etcd.ErrInvalidInput)
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: spec.CredentialsSecretRef.Name}, secret); err != nil {
		return nil, fmt.Errorf("failed to read snapshot credentials Secret %s/%s: %w", namespace, spec.CredentialsSecretRef.Name, err)
	}
	id, key := string(secret.Data[v1alpha1.SnapshotAccessKeyIDKey]), string(secret.Data[v1alpha1.SnapshotSecretAccessKeyKey])
	if id == "" || key == "" {
		return nil, fmt.Errorf("%w: snapshot credentials Secret %s/%s has no %s or %s", etcd.ErrInvalidInput, namespace, spec.CredentialsSecretRef.Name, v1alpha1.SnapshotAccessKeyIDKey, v1alpha1.SnapshotSecretAccessKeyKey)
	}
	store, err := snapshotstore.New(snapshotstore.Config{
		Endpoint: spec.Endpoint, Region: spec.Region, Bucket: spec.Bucket, Prefix: spec.Prefix,
		AccessKeyID: id, SecretAccessKey: key, SessionToken: string(secret.Data[v1alpha1.SnapshotSessionTokenKey]),
		ScratchDir: r.SnapshotScratchDir,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to use spec.snapshot: %w", err)
	}
	return store, nil
}
