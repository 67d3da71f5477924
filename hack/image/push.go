package main

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Push pushes the image index of the layout in dir to image. The layout must have been built for
// image (its index.json annotation org.opencontainers.image.ref.name), so what is pushed is what
// `make release-manifests` with the same IMG names.
func Push(ctx context.Context, dir, image string, opts ...remote.Option) error {
	ref, err := name.ParseReference(image)
	if err != nil {
		return fmt.Errorf("invalid image reference %q: %w", image, err)
	}
	idx, built, err := LayoutIndex(dir)
	if err != nil {
		return err
	}
	builtRef, err := name.ParseReference(built)
	if err != nil || builtRef.Name() != ref.Name() {
		return fmt.Errorf("the image layout %s was built for %q, not %s: build it with the same IMG", dir, built, image)
	}
	if err := remote.WriteIndex(ref, idx, append(opts, remote.WithContext(ctx))...); err != nil {
		return fmt.Errorf("failed to push %s to %s: %w", dir, ref.Name(), err)
	}
	return nil
}

// LayoutIndex opens the image layout in dir and returns its image index and the reference it
// was built for.
func LayoutIndex(dir string) (v1.ImageIndex, string, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, "", fmt.Errorf("failed to open the image layout %s (build it with make image): %w", dir, err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, "", fmt.Errorf("failed to read %s/index.json: %w", dir, err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, "", fmt.Errorf("failed to read %s/index.json: %w", dir, err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].MediaType != types.OCIImageIndex {
		return nil, "", fmt.Errorf("the image layout %s holds %d entries; want the one image index hack/image writes", dir, len(m.Manifests))
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return nil, "", fmt.Errorf("failed to read the image index of %s: %w", dir, err)
	}
	return idx, m.Manifests[0].Annotations[annotationRefName], nil
}
