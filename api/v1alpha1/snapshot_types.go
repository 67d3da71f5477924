package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of SnapshotSpec.
const (
	// DefaultSnapshotMaxAge is how old a verified snapshot may be and still precede a removal: a
	// snapshot taken for the previous removal of a scale-down serves the next one.
	DefaultSnapshotMaxAge = 10 * time.Minute
	// DefaultSnapshotRetain is how many snapshots of a Cluster are kept in the bucket.
	DefaultSnapshotRetain = 5
	// DefaultSnapshotWaitTimeout is how long a removal waits for a snapshot before the
	// condition and a Warning Event say it has waited too long (it keeps waiting).
	DefaultSnapshotWaitTimeout = 30 * time.Minute
)

// Keys of the Secret named by SnapshotSpec.CredentialsSecretRef.
const (
	// SnapshotAccessKeyIDKey is the Secret key holding the S3 access key ID.
	SnapshotAccessKeyIDKey = "accessKeyID"
	// SnapshotSecretAccessKeyKey is the Secret key holding the S3 secret access key.
	SnapshotSecretAccessKeyKey = "secretAccessKey"
	// SnapshotSessionTokenKey is the optional Secret key holding an S3 session token.
	SnapshotSessionTokenKey = "sessionToken"
)

// SnapshotSpec asks for a verified etcd snapshot before every member removal. kubeadm and
// external: etcd-adapter takes the snapshot, verifies it and uploads it to an S3-compatible
// bucket. K3s and RKE2: etcd-adapter waits for a snapshot K3s took and lists as an
// ETCDSnapshotFile (k3s.cattle.io/v1); the bucket fields are not used.
type SnapshotSpec struct {
	// Endpoint is the S3 endpoint URL, https://host[:port] (http:// only for a bucket on a
	// trusted network: the credentials and the snapshot cross it unencrypted).
	// Required for kubeadm and external.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Endpoint string `json:"endpoint,omitempty"`

	// Region is the bucket's region; empty lets the S3 client find it.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Region string `json:"region,omitempty"`

	// Bucket is the S3 bucket the snapshots go to. Required for kubeadm and external.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Bucket string `json:"bucket,omitempty"`

	// Prefix is prepended to every object key; the key is
	// <prefix><namespace>/<cluster>/<time>-<revision>.db.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Prefix string `json:"prefix,omitempty"`

	// CredentialsSecretRef names a Secret in the ControlPlaneEtcd's namespace with keys
	// accessKeyID and secretAccessKey (and optionally sessionToken). Required for kubeadm and
	// external.
	// +optional
	CredentialsSecretRef *corev1.LocalObjectReference `json:"credentialsSecretRef,omitempty"`

	// MaxAge is how old a verified snapshot may be and still precede a removal; default 10m.
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`

	// Retain is how many snapshots of the Cluster are kept in the bucket (the oldest go first);
	// default 5.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Retain *int32 `json:"retain,omitempty"`

	// WaitTimeout is how long a removal waits for a snapshot before the MemberRemovalSnapshot
	// reason turns SnapshotWaitExceeded and a Warning Event says so; the removal still waits
	// (it never goes on without a snapshot unless a person annotates the Machine
	// etcd-adapter.cluster.x-k8s.io/remove-without-snapshot=true). Default 30m.
	// +optional
	WaitTimeout *metav1.Duration `json:"waitTimeout,omitempty"`
}

// MaxAgeOrDefault returns spec.snapshot.maxAge, or DefaultSnapshotMaxAge when unset.
func (s SnapshotSpec) MaxAgeOrDefault() time.Duration {
	if s.MaxAge == nil || s.MaxAge.Duration <= 0 {
		return DefaultSnapshotMaxAge
	}
	return s.MaxAge.Duration
}

// RetainOrDefault returns spec.snapshot.retain, or DefaultSnapshotRetain when unset.
func (s SnapshotSpec) RetainOrDefault() int {
	if s.Retain == nil || *s.Retain < 1 {
		return DefaultSnapshotRetain
	}
	return int(*s.Retain)
}

// WaitTimeoutOrDefault returns spec.snapshot.waitTimeout, or DefaultSnapshotWaitTimeout when
// unset.
func (s SnapshotSpec) WaitTimeoutOrDefault() time.Duration {
	if s.WaitTimeout == nil || s.WaitTimeout.Duration <= 0 {
		return DefaultSnapshotWaitTimeout
	}
	return s.WaitTimeout.Duration
}

// SnapshotRecord names one verified snapshot.
type SnapshotRecord struct {
	// Key is where the snapshot is: the object key in the bucket (kubeadm, external), or the
	// ETCDSnapshotFile's name and location (K3s, RKE2).
	// +kubebuilder:validation:MaxLength=1024
	Key string `json:"key"`
	// Revision is the etcd revision the snapshot holds; 0 when not known (K3s).
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// Size is the snapshot's size in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`
	// Time is when the snapshot was taken.
	Time metav1.Time `json:"time"`
	// Verified says what was checked, e.g. "sha256, revision, consistency".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Verified string `json:"verified,omitempty"`
}

// SnapshotStatus is what spec.snapshot did.
type SnapshotStatus struct {
	// Last is the newest verified snapshot.
	// +optional
	Last *SnapshotRecord `json:"last,omitempty"`
	// WaitingSince is when the removal that waits for a snapshot started waiting; unset when
	// none waits.
	// +optional
	WaitingSince *metav1.Time `json:"waitingSince,omitempty"`
	// LastFailureTime is when the last attempt failed; unset when it succeeded. The next
	// attempt waits a retry interval from it.
	// +optional
	LastFailureTime *metav1.Time `json:"lastFailureTime,omitempty"`
	// LastError is why the last attempt failed; empty when it succeeded.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	LastError string `json:"lastError,omitempty"`
}

// Snapshot condition reasons, set on the Progressing condition while a removal waits for a
// snapshot.
const (
	// ProgressingWaitingForSnapshotReason: a removal waits for a fresh verified snapshot.
	ProgressingWaitingForSnapshotReason = "WaitingForSnapshot"
	// ProgressingSnapshotWaitExceededReason: a removal has waited for a snapshot longer than
	// spec.snapshot.waitTimeout; it still waits.
	ProgressingSnapshotWaitExceededReason = "SnapshotWaitExceeded"
)

// Snapshot Events.
const (
	// EventSnapshotTaken: a snapshot was taken, verified and uploaded.
	EventSnapshotTaken = "SnapshotTaken"
	// EventSnapshotFailed: a snapshot could not be taken, verified or uploaded.
	EventSnapshotFailed = "SnapshotFailed"
	// EventSnapshotWaitExceeded: a removal waited for a snapshot longer than the bound.
	EventSnapshotWaitExceeded = "SnapshotWaitExceeded"
	// EventRemovedWithoutSnapshot: a removal went on without a snapshot on a person's say-so
	// (RemoveWithoutSnapshotAnnotation).
	EventRemovedWithoutSnapshot = "RemovedWithoutSnapshot"
)

// RemoveWithoutSnapshotAnnotation on a deleting Machine, with the value AnnotationTrue, lets its
// member's removal go on without the snapshot spec.snapshot asks for; a Warning Event records
// it. It never lets an unsafe removal through: the quorum projection still decides.
const RemoveWithoutSnapshotAnnotation = "etcd-adapter.cluster.x-k8s.io/remove-without-snapshot"
