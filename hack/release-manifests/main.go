// Command release-manifests builds the components YAML clusterctl installs for the etcd-adapter
// addon provider: `kustomize build config/default` through the kustomize library (so nothing but
// the Go module proxy is needed), with the manager image set, next to metadata.yaml. The
// components hold clusterctl variables (${ETCD_ADAPTER_...:=default}, docs/operations.md
// "Settings kept across clusterctl upgrade"), which clusterctl fills in when it installs them.
//
//	go run ./hack/release-manifests -out out -image ghcr.io/etcd-adapter/etcd-adapter:v0.1.0
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const (
	// ComponentsFile is the name clusterctl looks for in an addon provider's release.
	ComponentsFile = "addon-components.yaml"
	// defaultImage is the image config/manager names; -image replaces it.
	defaultImage = "ghcr.io/etcd-adapter/etcd-adapter:dev"
)

func main() {
	root := flag.String("root", ".", "repository root (holds config/ and metadata.yaml)")
	out := flag.String("out", "out", "directory to write "+ComponentsFile+" and metadata.yaml into")
	image := flag.String("image", defaultImage, "manager image")
	flag.Parse()
	if err := release(*root, *out, *image); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func release(root, out, image string) error {
	components, err := Build(filepath.Join(root, "config", "default"), image)
	if err != nil {
		return err
	}
	metadata, err := os.ReadFile(filepath.Join(root, "metadata.yaml"))
	if err != nil {
		return fmt.Errorf("failed to read metadata.yaml: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", out, err)
	}
	for name, data := range map[string][]byte{ComponentsFile: components, "metadata.yaml": metadata} {
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil { //nolint:gosec // release artefacts are public
			return fmt.Errorf("failed to write %s: %w", name, err)
		}
		fmt.Println(filepath.Join(out, name))
	}
	return nil
}

// Build runs kustomize on dir and returns the YAML stream, with the manager image set.
func Build(dir, image string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("failed to build %s with kustomize: %w", dir, err)
	}
	y, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("failed to render %s: %w", dir, err)
	}
	if image != defaultImage {
		y = bytes.ReplaceAll(y, []byte("image: "+defaultImage), []byte("image: "+image))
	}
	return y, nil
}
