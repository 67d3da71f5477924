package quorumguard

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update

// admittedTTL is how long the guard counts a deletion it admitted as under way while the
// apiserver does not show the Machine deleting yet. The apiserver writes a deletion only after
// every validating webhook answered, and a webhook's timeoutSeconds is at most 30; a deletion not
// seen after that was refused by another webhook or failed, and is forgotten.
const admittedTTL = 40 * time.Second

// admissionRecord is what the apiserver holds of the deletions the guard admitted for one
// Cluster: a Lease (v1alpha1.QuorumGuardLeaseSuffix) whose AdmittedDeletionsAnnotation lists
// them. Every replica of the guard reads it before deciding and writes its admission back with
// the resourceVersion it read (an update, or a create when there was none), so that of two
// replicas deciding on the same record only one writes it; the other re-reads and decides again
// with the first one's admission counted.
type admissionRecord struct {
	// lease is the Lease as read; nil when there is none yet.
	lease    *coordinationv1.Lease
	admitted []admittedDeletion
}

// admittedDeletion is a deletion the guard let through, by Machine name and UID.
type admittedDeletion struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
	At   time.Time `json:"at"`
}

func leaseKey(cluster *clusterv1.Cluster) client.ObjectKey {
	return client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Name + v1alpha1.QuorumGuardLeaseSuffix}
}

// readRecord reads the Cluster's admission record uncached: a cached read could miss the
// admission another replica wrote a moment ago.
func (g *Guard) readRecord(ctx context.Context, cluster *clusterv1.Cluster) (*admissionRecord, error) {
	lease := &coordinationv1.Lease{}
	key := leaseKey(cluster)
	if err := g.APIReader.Get(ctx, key, lease); err != nil {
		if apierrors.IsNotFound(err) {
			return &admissionRecord{}, nil
		}
		return nil, fmt.Errorf("failed to read the quorum guard's Lease %s: %w", key, err)
	}
	rec := &admissionRecord{lease: lease}
	if raw := lease.Annotations[v1alpha1.AdmittedDeletionsAnnotation]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &rec.admitted); err != nil {
			return nil, fmt.Errorf("failed to read annotation %s of Lease %s (delete the Lease to reset it): %w", v1alpha1.AdmittedDeletionsAnnotation, key, err)
		}
	}
	return rec, nil
}

// underWay returns the Cluster's control-plane Machines being deleted other than self: first
// those the apiserver shows deleting, in the order the deletion hook handles them (oldest
// deletion first, then by name), then those the record holds that the apiserver does not show
// deleting yet, in the order they were admitted. A recorded deletion whose Machine is gone, was
// replaced (another UID) or shows its deletion is over; so is one older than admittedTTL.
func (r *admissionRecord) underWay(all []clusterv1.Machine, self *clusterv1.Machine, now time.Time) []*clusterv1.Machine {
	var out []*clusterv1.Machine
	for i := range all {
		m := &all[i]
		if !m.DeletionTimestamp.IsZero() && m.Name != self.Name {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *clusterv1.Machine) int {
		return cmp.Or(a.DeletionTimestamp.Compare(b.DeletionTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	for _, a := range r.pending(all, now) {
		if a.Name != self.Name {
			out = append(out, machineNamed(all, a.Name))
		}
	}
	return out
}

// pending are the recorded deletions still to be counted (see underWay).
func (r *admissionRecord) pending(all []clusterv1.Machine, now time.Time) []admittedDeletion {
	var out []admittedDeletion
	for _, a := range r.admitted {
		m := machineNamed(all, a.Name)
		if m == nil || m.UID != a.UID || !m.DeletionTimestamp.IsZero() || now.Sub(a.At) > admittedTTL {
			continue
		}
		out = append(out, a)
	}
	return out
}

func machineNamed(all []clusterv1.Machine, name string) *clusterv1.Machine {
	for i := range all {
		if all[i].Name == name {
			return &all[i]
		}
	}
	return nil
}

// writeRecord records m's admitted deletion with the deletions still pending, under the
// resourceVersion the record was read with: it fails with a Conflict (or AlreadyExists) when
// another replica wrote the record since, and the decision must be made again.
func (g *Guard) writeRecord(ctx context.Context, cluster *clusterv1.Cluster, rec *admissionRecord, m *clusterv1.Machine, all []clusterv1.Machine, now time.Time) error {
	admitted := slices.DeleteFunc(rec.pending(all, now), func(a admittedDeletion) bool { return a.Name == m.Name })
	raw, err := json.Marshal(append(admitted, admittedDeletion{Name: m.Name, UID: m.UID, At: now}))
	if err != nil {
		return fmt.Errorf("failed to encode the admitted deletions: %w", err)
	}
	lease := rec.lease
	if lease == nil {
		key := leaseKey(cluster)
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
			// Note: owned by the Cluster, so it goes with it.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID}}}}
	} else {
		lease = lease.DeepCopy()
	}
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[v1alpha1.AdmittedDeletionsAnnotation] = string(raw)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if rec.lease == nil {
		err = g.Writer.Create(ctx, lease)
	} else {
		err = g.Writer.Update(ctx, lease)
	}
	if err != nil {
		return fmt.Errorf("failed to record the admitted deletion of Machine %s on Lease %s: %w", m.Name, client.ObjectKeyFromObject(lease), err)
	}
	return nil
}

// lostRace reports whether err says another replica wrote the record since it was read.
func lostRace(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
