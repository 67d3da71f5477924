package k3s

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SnapshotFileListGVK is the list kind of the ETCDSnapshotFile objects K3s and RKE2 keep for
// their etcd snapshots (k3s-io/k3s pkg/apis/k3s.cattle.io/v1/types.go, PR 8064, November 2023
// patch releases; RKE2 PR 4883).
var SnapshotFileListGVK = schema.GroupVersionKind{Group: "k3s.cattle.io", Version: "v1", Kind: "ETCDSnapshotFileList"}

// ErrNoSnapshotFiles is returned when the workload cluster serves no ETCDSnapshotFile kind: a
// K3s or RKE2 older than the November 2023 patch releases, whose snapshots have no object to
// check.
var ErrNoSnapshotFiles = errors.New("the workload cluster serves no ETCDSnapshotFile (k3s.cattle.io/v1): K3s and RKE2 list their etcd snapshots as objects only from the November 2023 patch releases on")

// SnapshotFile is one ETCDSnapshotFile: one stored copy of one K3s etcd snapshot.
type SnapshotFile struct {
	// Name is the object's name.
	Name string
	// NodeName is the server that took the snapshot (spec.nodeName).
	NodeName string
	// Location is spec.location: file://… on NodeName's disk, or s3://….
	Location string
	// ReadyToUse is status.readyToUse: the file is written completely.
	ReadyToUse bool
	// CreationTime is status.creationTime; zero when K3s did not report it.
	CreationTime time.Time
	// Size is status.size in bytes; zero when not reported.
	Size int64
	// Error is status.error.message, when K3s failed to save it.
	Error string
}

// InS3 reports whether the copy is in an S3 bucket, away from every Node.
func (f SnapshotFile) InS3() bool { return strings.HasPrefix(f.Location, "s3://") }

// ListSnapshotFiles lists the ETCDSnapshotFile objects of a workload cluster through c (a live
// read: unstructured objects are not cached by controller-runtime's client by default). The
// list names no namespace: K3s registers the kind cluster-scoped (k3s-io/k3s pkg/crd/crds.go,
// crd.NonNamespacedType("ETCDSnapshotFile.k3s.cattle.io/v1")).
func ListSnapshotFiles(ctx context.Context, c client.Reader) ([]SnapshotFile, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(SnapshotFileListGVK)
	if err := c.List(ctx, l); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, ErrNoSnapshotFiles
		}
		return nil, fmt.Errorf("failed to list ETCDSnapshotFiles: %w", err)
	}
	out := make([]SnapshotFile, 0, len(l.Items))
	for _, o := range l.Items {
		out = append(out, snapshotFileOf(o))
	}
	return out, nil
}

// snapshotFileOf reads the fields K3s writes; a field of the wrong type reads as unset, so an
// object the gate cannot read never counts as ready.
func snapshotFileOf(o unstructured.Unstructured) SnapshotFile {
	f := SnapshotFile{Name: o.GetName()}
	f.NodeName, _, _ = unstructured.NestedString(o.Object, "spec", "nodeName")
	f.Location, _, _ = unstructured.NestedString(o.Object, "spec", "location")
	f.ReadyToUse, _, _ = unstructured.NestedBool(o.Object, "status", "readyToUse")
	f.Error, _, _ = unstructured.NestedString(o.Object, "status", "error", "message")
	if ts, ok, _ := unstructured.NestedString(o.Object, "status", "creationTime"); ok {
		if t, err := time.Parse(time.RFC3339, ts); err == nil {
			f.CreationTime = t
		} else {
			f.ReadyToUse = false
		}
	}
	if sz, ok, _ := unstructured.NestedString(o.Object, "status", "size"); ok {
		if q, err := resource.ParseQuantity(sz); err == nil {
			f.Size = q.Value()
		}
	}
	return f
}

// ChooseSnapshot picks, among the ETCDSnapshotFiles K3s lists, the newest that may precede
// the removal of the member on removedNode: readyToUse, taken no longer than maxAge before now
// (and not after now), and stored away from that Node (in S3, or on another Node's disk). A
// copy only on the Node being removed goes with its disk. It says why none counts.
func ChooseSnapshot(files []SnapshotFile, removedNode string, now time.Time, maxAge time.Duration) (*SnapshotFile, string) {
	var best *SnapshotFile
	onRemoved := 0
	for i, f := range files {
		age := now.Sub(f.CreationTime)
		switch {
		case !f.ReadyToUse, f.CreationTime.IsZero(), age < 0, age > maxAge:
			continue
		case !f.InS3() && f.NodeName == removedNode:
			onRemoved++
			continue
		}
		if best == nil || f.CreationTime.After(best.CreationTime) {
			best = &files[i]
		}
	}
	switch {
	case best != nil:
		return best, ""
	case onRemoved > 0:
		return nil, fmt.Sprintf("the ready ETCDSnapshotFiles fresher than %s are stored only on Node %s, whose member is being removed", maxAge, removedNode)
	}
	return nil, fmt.Sprintf("K3s lists no readyToUse ETCDSnapshotFile taken within the last %s (%d listed)", maxAge, len(files))
}
