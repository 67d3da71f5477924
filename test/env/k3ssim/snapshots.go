package k3ssim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SnapshotFileGVK is the kind K3s lists its etcd snapshots as: ETCDSnapshotFile, declared in
// k3s-io/k3s pkg/apis/k3s.cattle.io/v1/types.go and, since K3s moved its API types out,
// in k3s-io/api k3s.cattle.io/v1/types.go. It is cluster-scoped (see ensureSnapshotFileCRD).
var SnapshotFileGVK = schema.GroupVersionKind{Group: "k3s.cattle.io", Version: "v1", Kind: "ETCDSnapshotFile"}

// ErrNoSnapshotFiles is returned by SaveSnapshot on a K3s version that does not list snapshots
// as ETCDSnapshotFile objects (before changeSnapshotFiles): its snapshots have no object a
// client could wait for.
var ErrNoSnapshotFiles = errors.New("this K3s version does not publish ETCDSnapshotFile objects")

// SnapshotSpec is one snapshot a server takes.
type SnapshotSpec struct {
	// Node is the server that takes it.
	Node string
	// S3 stores it in the S3 bucket of the K3s configuration (--etcd-s3) instead of only on
	// Node's disk.
	S3 bool
	// Failed makes K3s fail to save it: status.readyToUse stays false and status.error is set.
	Failed bool
	// Size is the size K3s reports; zero means 4 MiB.
	Size int64
}

// SaveSnapshot plays `k3s etcd-snapshot save` (or a scheduled snapshot) on spec.Node, as K3s
// lists it from changeSnapshotFiles on: K3s writes the file, then creates one ETCDSnapshotFile
// per stored copy with spec.snapshotName, spec.nodeName, spec.location (file:// on the Node's
// disk, s3:// with spec.s3 for an upload) and status.readyToUse, status.creationTime,
// status.size (k3s-io/k3s pkg/etcd/snapshot.go, snapshotFile.toETCDSnapshotFile). It returns
// the objects' names. The CRD is installed at Start, as K3s's server registers its CRDs.
func (s *Simulator) SaveSnapshot(ctx context.Context, spec SnapshotSpec) ([]string, error) {
	p := s.profileFor(spec.Node)
	if !p.HasSnapshotFiles {
		return nil, fmt.Errorf("%w (%s)", ErrNoSnapshotFiles, p.Version)
	}
	now := time.Now().UTC()
	// K3s names a snapshot <prefix>-<node>-<unix time> (etcd-snapshot-<node>-<ts> by default).
	snapshotName := fmt.Sprintf("etcd-snapshot-%s-%d", spec.Node, now.UnixNano())
	size := spec.Size
	if size == 0 {
		size = 4 << 20
	}
	copies := []struct{ kind, location string }{{"local", "file:///var/lib/rancher/" + p.Program + "/server/db/snapshots/" + snapshotName}}
	if spec.S3 {
		copies = append(copies, struct{ kind, location string }{"s3", "s3://k3s-snapshots/" + snapshotName})
	}
	var names []string
	for _, c := range copies {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(SnapshotFileGVK)
		// K3s names the object <local|s3>-<snapshot name>, sanitised to a DNS subdomain.
		o.SetName(strings.ToLower(c.kind + "-" + snapshotName))
		fileSpec := map[string]any{"snapshotName": snapshotName, "nodeName": spec.Node, "location": c.location}
		if c.kind == "s3" {
			fileSpec["s3"] = map[string]any{"bucket": "k3s-snapshots", "endpoint": "s3.amazonaws.com"}
		}
		o.Object["spec"] = fileSpec
		if err := s.client.Create(ctx, o); err != nil {
			return names, fmt.Errorf("failed to create ETCDSnapshotFile %s: %w", o.GetName(), err)
		}
		status := map[string]any{"creationTime": metav1.NewTime(now).Format(time.RFC3339), "readyToUse": !spec.Failed,
			"size": resource.NewQuantity(size, resource.BinarySI).String()}
		if spec.Failed {
			status["error"] = map[string]any{"time": now.Format(time.RFC3339), "message": "failed to save snapshot"}
		}
		o.Object["status"] = status
		if err := s.client.Status().Update(ctx, o); err != nil {
			return names, fmt.Errorf("failed to write the status of ETCDSnapshotFile %s: %w", o.GetName(), err)
		}
		names = append(names, o.GetName())
	}
	return names, nil
}

// ensureSnapshotFileCRD installs the ETCDSnapshotFile CRD (the fields K3s's CRD declares that
// the simulator writes) and waits until it is served.
func (s *Simulator) ensureSnapshotFileCRD(ctx context.Context) error {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "etcdsnapshotfiles.k3s.cattle.io"},
		"spec": map[string]any{
			// Cluster-scoped, as K3s registers it: crd.NonNamespacedType("ETCDSnapshotFile.k3s.cattle.io/v1")
			// in k3s-io/k3s pkg/crd/crds.go, and +genclient:nonNamespaced on the type (k3s-io/api
			// k3s.cattle.io/v1/types.go). Addon, beside it, is the namespaced one.
			"group": "k3s.cattle.io", "scope": "Cluster",
			"names": map[string]any{"kind": "ETCDSnapshotFile", "listKind": "ETCDSnapshotFileList", "plural": "etcdsnapshotfiles", "singular": "etcdsnapshotfile"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	if err := s.client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to install the ETCDSnapshotFile CRD: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(SnapshotFileGVK.GroupVersion().WithKind("ETCDSnapshotFileList"))
		err := s.client.List(ctx, l, client.Limit(1))
		return err == nil, nil
	})
}
