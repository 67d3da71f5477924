package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Defaults of MaintenanceSpec.
const (
	// DefaultQuotaBackendBytes is etcd's own default of --quota-backend-bytes, 2 GiB
	// (go.etcd.io/etcd/server/v3 storage/quota.go DefaultQuotaBytes), used for a member that does
	// not report its quota (etcd before v3.6 leaves StatusResponse.dbSizeQuota zero) when
	// spec.maintenance.defragmentation.quotaBackendBytes is unset.
	DefaultQuotaBackendBytes int64 = 2 * 1024 * 1024 * 1024
	// DefaultNoSpaceHeadroomPercent is the share of its quota a member's database file must stay
	// below before a NOSPACE alarm is disarmed: etcd refuses a write that would take the file
	// past the quota (storage/quota.go backendQuota.Available), so disarming with less room left
	// raises the alarm again on the next burst of writes.
	DefaultNoSpaceHeadroomPercent int32 = 20
	// DefaultDefragmentationTimeout bounds one Defragment call. etcd blocks the member's reads
	// and writes while it copies the database into a new file (etcd documentation,
	// op-guide/maintenance, "Defragmentation").
	DefaultDefragmentationTimeout = 5 * time.Minute
	// MaxDefragmentationRecords is how many defragmentations status.maintenance keeps.
	MaxDefragmentationRecords = 10
)

// MaintenanceSpec is the etcd maintenance etcd-adapter does on its own. Only the kubeadm and
// external backends do it: K3s and RKE2 give no access to etcd's maintenance API.
type MaintenanceSpec struct {
	// Defragmentation defragments members one at a time, followers first, when their database
	// file holds too many free pages or a NOSPACE alarm is raised, and disarms NOSPACE once every
	// member is below its quota with headroom. Unset: etcd-adapter never defragments. It never
	// compacts: the kube-apiserver does (--etcd-compaction-interval, default 5m).
	// +optional
	Defragmentation *DefragmentationSpec `json:"defragmentation,omitempty"`
}

// DefragmentationSpec says when a member is defragmented.
// +kubebuilder:validation:XValidation:rule="has(self.freeBytesThreshold) || has(self.freePercentThreshold) || (has(self.onNoSpace) && self.onNoSpace)",message="set freeBytesThreshold, freePercentThreshold, or onNoSpace: true"
type DefragmentationSpec struct {
	// FreeBytesThreshold: a member is defragmented when its free pages (etcd Status dbSize minus
	// dbSizeInUse) reach this size. With freePercentThreshold too, both must be reached. Unset:
	// free space alone never starts a defragmentation.
	// +optional
	FreeBytesThreshold *resource.Quantity `json:"freeBytesThreshold,omitempty"`

	// FreePercentThreshold: a member is defragmented when its free pages reach this share of its
	// database file (dbSize). With freeBytesThreshold too, both must be reached.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	FreePercentThreshold *int32 `json:"freePercentThreshold,omitempty"`

	// OnNoSpace, when true (the default), recovers from a NOSPACE alarm: the members whose
	// database file is above its quota less the headroom are defragmented, and the alarm is
	// disarmed once none is.
	// +optional
	// +kubebuilder:default=true
	OnNoSpace *bool `json:"onNoSpace,omitempty"`

	// QuotaBackendBytes is the members' --quota-backend-bytes, used for a member that does not
	// report its quota (etcd before v3.6). Default: etcd's default, 2Gi.
	// +optional
	QuotaBackendBytes *resource.Quantity `json:"quotaBackendBytes,omitempty"`

	// NoSpaceHeadroomPercent is the share of its quota a member's database file must stay below
	// before NOSPACE is disarmed. Default 20.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=90
	NoSpaceHeadroomPercent *int32 `json:"noSpaceHeadroomPercent,omitempty"`

	// Timeout bounds one Defragment call; default 5m. etcd blocks the member for the whole
	// defragmentation, and the reconcile worker waits for it.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// OnNoSpaceOrDefault returns spec.onNoSpace, true when unset.
func (d DefragmentationSpec) OnNoSpaceOrDefault() bool { return d.OnNoSpace == nil || *d.OnNoSpace }

// QuotaBackendBytesOrDefault returns spec.quotaBackendBytes, or DefaultQuotaBackendBytes when
// unset or not positive.
func (d DefragmentationSpec) QuotaBackendBytesOrDefault() int64 {
	if d.QuotaBackendBytes == nil || d.QuotaBackendBytes.Value() <= 0 {
		return DefaultQuotaBackendBytes
	}
	return d.QuotaBackendBytes.Value()
}

// NoSpaceHeadroomPercentOrDefault returns spec.noSpaceHeadroomPercent, or
// DefaultNoSpaceHeadroomPercent when unset or out of range.
func (d DefragmentationSpec) NoSpaceHeadroomPercentOrDefault() int32 {
	if d.NoSpaceHeadroomPercent == nil || *d.NoSpaceHeadroomPercent < 1 || *d.NoSpaceHeadroomPercent > 90 {
		return DefaultNoSpaceHeadroomPercent
	}
	return *d.NoSpaceHeadroomPercent
}

// TimeoutOrDefault returns spec.timeout, or DefaultDefragmentationTimeout when unset.
func (d DefragmentationSpec) TimeoutOrDefault() time.Duration {
	if d.Timeout == nil || d.Timeout.Duration <= 0 {
		return DefaultDefragmentationTimeout
	}
	return d.Timeout.Duration
}

// MaintenanceStatus is what etcd maintenance did last.
type MaintenanceStatus struct {
	// Defragmentations are the last defragmentations, newest last, at most
	// MaxDefragmentationRecords.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Defragmentations []DefragmentationRecord `json:"defragmentations,omitempty"`

	// Message says what maintenance does or waits for now.
	// +optional
	// +kubebuilder:validation:MaxLength=10240
	Message string `json:"message,omitempty"`

	// LastNoSpaceDisarmTime is when etcd-adapter last disarmed a NOSPACE alarm.
	// +optional
	LastNoSpaceDisarmTime *metav1.Time `json:"lastNoSpaceDisarmTime,omitempty"`
}

// DefragmentationRecord is one defragmentation of one member, with its database sizes before and
// after (etcd Status dbSize and dbSizeInUse).
type DefragmentationRecord struct {
	// Member is the member's name.
	// +required
	// +kubebuilder:validation:MaxLength=256
	Member string `json:"member"`

	// MemberID is the etcd member ID in hexadecimal, as etcdctl member list shows it.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	MemberID string `json:"memberID,omitempty"`

	// Reason is why it was defragmented: NoSpace or FreeSpaceThreshold.
	// +required
	Reason string `json:"reason"`

	// StartTime is when the Defragment call was made.
	// +required
	StartTime metav1.Time `json:"startTime"`

	// Duration is how long the Defragment call took.
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`

	// DBSizeBefore and DBSizeInUseBefore are the member's sizes in bytes right before.
	// +required
	DBSizeBefore int64 `json:"dbSizeBefore"`
	// +required
	DBSizeInUseBefore int64 `json:"dbSizeInUseBefore"`

	// DBSizeAfter and DBSizeInUseAfter are the member's sizes in bytes right after; unset when
	// the member did not answer then.
	// +optional
	DBSizeAfter *int64 `json:"dbSizeAfter,omitempty"`
	// +optional
	DBSizeInUseAfter *int64 `json:"dbSizeInUseAfter,omitempty"`

	// Error is why the Defragment call failed; empty when it succeeded.
	// +optional
	// +kubebuilder:validation:MaxLength=10240
	Error string `json:"error,omitempty"`
}

// Reasons of a defragmentation (DefragmentationRecord.Reason, and the decision's).
const (
	// DefragmentationReasonNoSpace: a NOSPACE alarm is raised and the member's database file is
	// above its quota less the headroom.
	DefragmentationReasonNoSpace = etcd.DefragReasonNoSpace
	// DefragmentationReasonFreeSpace: the member's free pages passed the thresholds.
	DefragmentationReasonFreeSpace = etcd.DefragReasonFreeSpace
)

// Events the ControlPlaneEtcd controller records on the ControlPlaneEtcd for maintenance, by
// reason.
const (
	// EventMemberDefragmented: a member was defragmented; the message gives its sizes before and
	// after.
	EventMemberDefragmented = "MemberDefragmented"
	// EventDefragmentationFailed: a Defragment call failed (Warning).
	EventDefragmentationFailed = "DefragmentationFailed"
	// EventDefragmentationLeaderMoved: leadership was moved off a member before defragmenting it.
	EventDefragmentationLeaderMoved = "DefragmentationLeaderMoved"
	// EventNoSpaceDisarmed: the NOSPACE alarm was disarmed; the message gives every member's size
	// against its quota.
	EventNoSpaceDisarmed = "NoSpaceDisarmed"
	// EventMaintenanceBlocked: maintenance is needed and not safe now; the message says why
	// (Warning).
	EventMaintenanceBlocked = "MaintenanceBlocked"
)
