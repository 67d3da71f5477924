package controlplaneetcd

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// read returns the ControlPlaneEtcd a pass starts from.
//
// The status is patched against what was read, and the removal flow decides from
// status.removal, so a pass must not start from a copy older than the previous pass's write: a
// lagging copy makes the patch drop fields that did not change from it (a removal record left
// InProgress for ever). The cached copy is used when its resourceVersion is the newest this
// controller knows for the object: the one it got back from its own last write, or read uncached
// last. Any other copy (the first pass after a start, a cache that has not caught up, a write by
// somebody else) is read again through the APIReader.
//
// Why not read uncached every pass: that is one GET per pass, about 33 per second for 1,000
// Clusters at the 30 s interval, and a failure seen by the whole fleet at once then queues
// three requests per Cluster behind the client's rate limit instead of two (docs/benchmarks.md).
func (r *Reconciler) read(ctx context.Context, key types.NamespacedName) (*v1alpha1.ControlPlaneEtcd, error) {
	cpe := &v1alpha1.ControlPlaneEtcd{}
	if r.APIReader == nil {
		return cpe, r.Client.Get(ctx, key, cpe)
	}
	if known, ok := r.versions.Load(key); ok {
		err := r.Client.Get(ctx, key, cpe)
		if err == nil && cpe.ResourceVersion == known.(string) {
			return cpe, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		cpe = &v1alpha1.ControlPlaneEtcd{}
	}
	if err := r.APIReader.Get(ctx, key, cpe); err != nil {
		return nil, err
	}
	r.versions.Store(key, cpe.ResourceVersion)
	return cpe, nil
}

// wrote records the resourceVersion a write of the ControlPlaneEtcd returned.
func (r *Reconciler) wrote(o client.Object) {
	if cpe, ok := o.(*v1alpha1.ControlPlaneEtcd); ok && cpe.ResourceVersion != "" {
		r.versions.Store(client.ObjectKeyFromObject(cpe), cpe.ResourceVersion)
	}
}

// recording returns r.Client with the ControlPlaneEtcd writes recorded (wrote). Cluster API's
// patch helper writes copies of the object it is given, so the version cannot be read off the
// pass's object afterwards.
func (r *Reconciler) recording() client.Client {
	return recordingClient{Client: r.Client, wrote: r.wrote}
}

type recordingClient struct {
	client.Client
	wrote func(client.Object)
}

func (c recordingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	if err := c.Client.Patch(ctx, obj, p, opts...); err != nil {
		return err
	}
	c.wrote(obj)
	return nil
}

func (c recordingClient) Status() client.SubResourceWriter {
	return recordingStatus{SubResourceWriter: c.Client.Status(), wrote: c.wrote}
}

type recordingStatus struct {
	client.SubResourceWriter
	wrote func(client.Object)
}

func (s recordingStatus) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.SubResourceWriter.Patch(ctx, obj, p, opts...); err != nil {
		return err
	}
	s.wrote(obj)
	return nil
}
