package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image assembles one platform's image from the manager binary at bin: one layer, the binary
// as Entrypoint and its SBOM at SBOMPath, running as User, with labels.
func Image(bin string, platform v1.Platform, labels map[string]string, created time.Time) (v1.Image, error) {
	manager, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("failed to read the manager binary: %w", err)
	}
	sbom, err := binarySBOM(manager, labels[annotationVersion], created)
	if err != nil {
		return nil, err
	}
	tarBytes, err := layerTar(manager, sbom, created)
	if err != nil {
		return nil, err
	}
	layer, err := layerFromTar(tarBytes)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: platform.Architecture,
		OS:           platform.OS,
		Variant:      platform.Variant,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			Entrypoint: []string{Entrypoint},
			User:       User,
			WorkingDir: "/",
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
			Labels:     labels,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to set the image configuration: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "hack/image: etcd-adapter manager"},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to add the manager layer: %w", err)
	}
	return img, nil
}

func layerFromTar(b []byte) (v1.Layer, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("failed to build the manager layer: %w", err)
	}
	return layer, nil
}

// The user and group files: without them the runtime still runs the numeric User, but tools that
// resolve names (and `id` in a debug container sharing the process namespace) show none.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// layerTar is the image's only layer: the manager binary, its SBOM, the user and group files,
// the non-root user's home and /tmp. Every entry has the same mtime, so the same binary gives the
// same layer digest.
func layerTar(manager, sbom []byte, mtime time.Time) ([]byte, error) {
	type entry struct {
		hdr  tar.Header
		data []byte
	}
	dir := func(name string, mode int64, uid int) entry {
		return entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: uid, Gid: uid}}
	}
	file := func(name string, mode int64, data []byte) entry {
		return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data: data}
	}
	entries := []entry{
		dir("etc/", 0o755, 0),
		file("etc/group", 0o644, []byte(group)),
		file("etc/passwd", 0o644, []byte(passwd)),
		dir("home/", 0o755, 0),
		dir("home/nonroot/", 0o700, 65532),
		file(strings.TrimPrefix(Entrypoint, "/"), 0o755, manager),
		dir("tmp/", 0o1777, 0),
		dir("usr/", 0o755, 0),
		dir("usr/share/", 0o755, 0),
		dir("usr/share/doc/", 0o755, 0),
		dir("usr/share/doc/etcd-adapter/", 0o755, 0),
		file(strings.TrimPrefix(SBOMPath, "/"), 0o644, sbom),
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		e.hdr.ModTime = mtime
		e.hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, fmt.Errorf("failed to write %s into the layer: %w", e.hdr.Name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("failed to write %s into the layer: %w", e.hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("failed to finish the layer: %w", err)
	}
	return buf.Bytes(), nil
}
