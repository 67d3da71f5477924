// Command image builds the etcd-adapter manager's container image with nothing but Go: no Docker,
// no base image pulled from a registry. It cross-compiles cmd/etcd-adapter as a static binary per
// platform and assembles, with go-containerregistry, one single-layer image per platform (the
// binary as /manager, plus /etc/passwd and /etc/group naming the non-root user 65532 as
// distroless' "nonroot") under a multi-platform OCI image index, written as an OCI image layout.
//
//	go run ./hack/image -out out/image -image ghcr.io/etcd-adapter/etcd-adapter:v0.1.0
//	go run ./hack/image -out out/image -image registry.example.com/etcd-adapter:v0.1.0 -push
//
// The layout's index.json names the image reference in the annotation
// org.opencontainers.image.ref.name, so the layout says which tag it was built for; -push builds
// the layout and then pushes its index to that reference.
//
// The build is reproducible: every file in the layer and the image's creation time are stamped
// with SOURCE_DATE_EPOCH (the Unix epoch when unset), and the binary is built with -trimpath.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// Entrypoint is where the manager binary sits in the image.
	Entrypoint = "/manager"
	// User is the user and group the manager runs as: distroless' "nonroot", which the manager
	// Deployment (config/manager/manager.yaml) also sets as runAsUser and runAsGroup.
	User = "65532:65532"

	// The OCI annotation (image-spec annotations.md) that names the reference an index.json
	// entry of an image layout was built for.
	annotationRefName = "org.opencontainers.image.ref.name"
	// The OCI pre-defined annotation keys the image carries as labels and the index as annotations.
	annotationSource   = "org.opencontainers.image.source"
	annotationVersion  = "org.opencontainers.image.version"
	annotationRevision = "org.opencontainers.image.revision"
	annotationCreated  = "org.opencontainers.image.created"

	defaultSource = "https://github.com/etcd-adapter/etcd-adapter"
)

// Options say what to build: which reference, for which platforms, with which labels.
type Options struct {
	// Root is the repository root (holds go.mod and cmd/etcd-adapter).
	Root string
	// Out is the directory the OCI image layout is written to. It is replaced if it holds an
	// image layout already, and refused if it holds anything else.
	Out string
	// Image is the reference the image is built for (and pushed to).
	Image string
	// Platforms are os/arch pairs, e.g. linux/amd64.
	Platforms []string
	// Source, Version and Revision become the org.opencontainers.image.* labels.
	Source, Version, Revision string
	// Created stamps the image configuration and every file in the layer.
	Created time.Time
	// Go is the go command used to build the manager.
	Go string
}

func main() {
	opts := Options{}
	var platforms string
	var push bool
	flag.StringVar(&opts.Root, "root", ".", "repository root (holds go.mod and cmd/etcd-adapter)")
	flag.StringVar(&opts.Out, "out", filepath.Join("out", "image"), "directory to write the OCI image layout into")
	flag.StringVar(&opts.Image, "image", "ghcr.io/etcd-adapter/etcd-adapter:dev", "image reference the image is built for (and pushed to with -push)")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch pairs")
	flag.StringVar(&opts.Source, "source", defaultSource, "org.opencontainers.image.source label")
	flag.StringVar(&opts.Version, "version", "", "org.opencontainers.image.version label (default: git describe --tags --always --dirty, else the image tag)")
	flag.StringVar(&opts.Revision, "revision", "", "org.opencontainers.image.revision label (default: git rev-parse HEAD)")
	flag.StringVar(&opts.Go, "go", "go", "go command that builds the manager")
	flag.BoolVar(&push, "push", false, "push the image index to -image after building it")
	flag.Parse()
	opts.Platforms = strings.Split(platforms, ",")

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if err := run(ctx, opts, push); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts Options, push bool) error {
	created, err := sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	opts.Created = created
	if err := opts.defaultLabels(ctx); err != nil {
		return err
	}
	digest, err := Build(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s@%s (%s, version %s, revision %s)\n", opts.Out, opts.Image, digest, strings.Join(opts.Platforms, ", "), opts.Version, opts.Revision)
	if !push {
		return nil
	}
	if err := Push(ctx, opts.Out, opts.Image, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", opts.Image, digest)
	return nil
}

// sourceDateEpoch reads SOURCE_DATE_EPOCH (reproducible-builds.org): seconds since the Unix epoch,
// the Unix epoch itself when unset.
func sourceDateEpoch(v string) (time.Time, error) {
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid SOURCE_DATE_EPOCH %q: want seconds since the Unix epoch: %w", v, err)
	}
	return time.Unix(s, 0).UTC(), nil
}

// defaultLabels fills Version and Revision from git when they are not given. A source tree
// without git (an unpacked archive) still builds: the version falls back to the image tag and
// the revision to "unknown", with a warning.
func (o *Options) defaultLabels(ctx context.Context) error {
	ref, err := name.ParseReference(o.Image)
	if err != nil {
		return fmt.Errorf("invalid image reference %q: %w", o.Image, err)
	}
	if o.Version == "" {
		if v, err := git(ctx, o.Root, "describe", "--tags", "--always", "--dirty"); err == nil {
			o.Version = v
		} else if tag, ok := ref.(name.Tag); ok {
			fmt.Fprintf(os.Stderr, "warning: no version from git (%v); using the image tag %s\n", err, tag.TagStr())
			o.Version = tag.TagStr()
		} else {
			return fmt.Errorf("failed to find a version: git describe failed (%w) and image %s has no tag; pass -version", err, o.Image)
		}
	}
	if o.Revision == "" {
		if r, err := git(ctx, o.Root, "rev-parse", "HEAD"); err == nil {
			o.Revision = r
		} else {
			fmt.Fprintf(os.Stderr, "warning: no revision from git (%v); labelling the image with revision \"unknown\"\n", err)
			o.Revision = "unknown"
		}
	}
	return nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(exitErr.Stderr))
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Build compiles the manager for every platform, assembles the image index and writes it as an
// OCI image layout into opts.Out. It returns the index digest.
func Build(ctx context.Context, opts Options) (v1.Hash, error) {
	if _, err := name.ParseReference(opts.Image); err != nil {
		return v1.Hash{}, fmt.Errorf("invalid image reference %q: %w", opts.Image, err)
	}
	if len(opts.Platforms) == 0 {
		return v1.Hash{}, errors.New("no platforms to build for")
	}
	binDir, err := os.MkdirTemp("", "etcd-adapter-image-")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("failed to create a build directory: %w", err)
	}
	defer func() {
		if err := os.RemoveAll(binDir); err != nil {
			fmt.Fprintf(os.Stderr, "warning: failed to remove the build directory %s: %v\n", binDir, err)
		}
	}()

	labels := map[string]string{
		annotationSource:   opts.Source,
		annotationVersion:  opts.Version,
		annotationRevision: opts.Revision,
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range opts.Platforms {
		platform, err := v1.ParsePlatform(p)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("invalid platform %q: %w", p, err)
		}
		if platform.OS != "linux" || platform.Architecture == "" {
			return v1.Hash{}, fmt.Errorf("invalid platform %q: want linux/<arch>", p)
		}
		bin := filepath.Join(binDir, "manager-"+platform.OS+"-"+platform.Architecture+platform.Variant)
		if err := buildManager(ctx, opts, *platform, bin); err != nil {
			return v1.Hash{}, err
		}
		img, err := Image(bin, *platform, labels, opts.Created)
		if err != nil {
			return v1.Hash{}, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: platform},
		})
	}
	annotations := map[string]string{annotationCreated: opts.Created.Format(time.RFC3339)}
	for k, v := range labels {
		annotations[k] = v
	}
	idx = mutate.Annotations(idx, annotations).(v1.ImageIndex)

	if err := resetLayout(opts.Out); err != nil {
		return v1.Hash{}, err
	}
	lp, err := layout.Write(opts.Out, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("failed to create the image layout %s: %w", opts.Out, err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{annotationRefName: opts.Image})); err != nil {
		return v1.Hash{}, fmt.Errorf("failed to write the image index into %s: %w", opts.Out, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("failed to compute the image index digest: %w", err)
	}
	return digest, nil
}

// buildManager cross-compiles cmd/etcd-adapter into bin: static (CGO_ENABLED=0, so the image
// needs no libc), without paths of the build machine (-trimpath) and without the symbol table
// and DWARF (-s -w), which only a debugger reads.
func buildManager(ctx context.Context, opts Options, platform v1.Platform, bin string) error {
	cmd := exec.CommandContext(ctx, opts.Go, "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/etcd-adapter")
	cmd.Dir = opts.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+platform.OS, "GOARCH="+platform.Architecture)
	if platform.Architecture == "arm" && platform.Variant != "" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(platform.Variant, "v"))
	}
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	fmt.Fprintf(os.Stderr, "building the manager for %s\n", platform.String())
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("failed to build the manager for %s: %w", platform.String(), err)
	}
	return nil
}

// resetLayout empties dir for a new layout. It refuses a directory that holds anything but an
// OCI image layout, so a mistyped -out does not delete someone's files; an old layout is
// removed whole, since go-containerregistry would otherwise keep its blobs beside the new ones.
func resetLayout(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", dir, err)
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return fmt.Errorf("refusing to write the image layout into %s: it is not empty and holds no oci-layout file", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("failed to remove the old image layout %s: %w", dir, err)
	}
	return nil
}
