package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestImage runs `make image-push` and `make release-manifests` with one IMG against an
// in-process registry, and checks what a cluster would run: the OCI layout holds an index of
// linux/amd64 and linux/arm64 images, each with /manager as entrypoint, a static ELF for its
// machine, run as the non-root user 65532 that /etc/passwd names, labelled with source, version
// and revision; the registry holds the same index under IMG; the components' Deployment runs
// IMG. The manager is cross-compiled per platform here and in TestQuickStartImage only; both
// build with -trimpath, so the second reuses the packages the first compiled (Go build cache).
func TestImage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	g.Expect(err).NotTo(HaveOccurred())

	reg := httptest.NewServer(registry.New(registry.Logger(discardLogger())))
	defer reg.Close()
	img := strings.TrimPrefix(reg.URL, "http://") + "/etcd-adapter/etcd-adapter:v0.0.0-test"
	tmp := t.TempDir()
	layoutDir := filepath.Join(tmp, "image")
	releaseDir := filepath.Join(tmp, "release")
	const revision = "0123456789abcdef0123456789abcdef01234567"

	mk := func(args ...string) {
		cmd := exec.CommandContext(ctx, "make", append([]string{"-C", root}, args...)...)
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000")
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "make %s:\n%s", strings.Join(args, " "), out)
	}
	mk("image-push", "IMG="+img, "IMAGE_DIR="+layoutDir, "IMAGE_VERSION=v0.0.0-test", "IMAGE_REVISION="+revision)
	mk("release-manifests", "IMG="+img, "RELEASE_DIR="+releaseDir)

	idx, builtFor, err := LayoutIndex(layoutDir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(builtFor).To(Equal(img))
	g.Expect(deploymentImages(g, filepath.Join(releaseDir, ComponentsFileName))).To(Equal([]string{builtFor}),
		"the components run the image make image built")

	im, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(im.MediaType).To(Equal(types.OCIImageIndex))
	g.Expect(im.Annotations).To(HaveKeyWithValue(annotationRevision, revision))
	var platforms []string
	for _, d := range im.Manifests {
		g.Expect(d.Platform).NotTo(BeNil())
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		g.Expect(err).NotTo(HaveOccurred())
		checkImage(g, img, *d.Platform, imageLabels{created: time.Unix(1700000000, 0), version: "v0.0.0-test", revision: revision})
	}
	g.Expect(platforms).To(ConsistOf("linux/amd64", "linux/arm64"))

	ref := mustParse(g, img)
	pushed, err := remote.Index(ref)
	g.Expect(err).NotTo(HaveOccurred())
	want, err := idx.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pushed.Digest()).To(Equal(want), "the registry holds the index of the layout")

	g.Expect(Push(ctx, layoutDir, "example.com/etcd-adapter:other")).To(MatchError(ContainSubstring("was built for")),
		"pushing a layout under another tag than it was built for is refused")
	reg.Close()
	err = Push(ctx, layoutDir, img, remote.WithRetryBackoff(remote.Backoff{Steps: 1}))
	g.Expect(err).To(MatchError(ContainSubstring("failed to push " + layoutDir + " to " + ref.Name())))
}

// ComponentsFileName is the components file make release-manifests writes.
const ComponentsFileName = "addon-components.yaml"

// imageLabels are what an image is stamped with: SOURCE_DATE_EPOCH and the version and revision.
type imageLabels struct {
	created           time.Time
	version, revision string
}

func checkImage(g Gomega, img v1.Image, platform v1.Platform, want imageLabels) {
	cfg, err := img.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.OS).To(Equal(platform.OS))
	g.Expect(cfg.Architecture).To(Equal(platform.Architecture))
	g.Expect(cfg.Created.Time.Equal(want.created)).To(BeTrue(), "created %s", cfg.Created)
	g.Expect(cfg.Config.Entrypoint).To(Equal([]string{"/manager"}))
	g.Expect(cfg.Config.User).To(Equal("65532:65532"))
	g.Expect(cfg.Config.Labels).To(Equal(map[string]string{
		"org.opencontainers.image.source":   "https://github.com/etcd-adapter/etcd-adapter",
		"org.opencontainers.image.version":  want.version,
		"org.opencontainers.image.revision": want.revision,
	}))

	layers, err := img.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(layers).To(HaveLen(1))
	files := layerFiles(g, layers[0])
	g.Expect(files).To(HaveKey("manager"))
	g.Expect(files["manager"].hdr.Mode&0o111).To(Equal(int64(0o111)), "executable")
	g.Expect(string(files["etc/passwd"].data)).To(ContainSubstring("nonroot:x:65532:65532:"))

	bin, err := elf.NewFile(bytes.NewReader(files["manager"].data))
	g.Expect(err).NotTo(HaveOccurred())
	wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[platform.Architecture]
	g.Expect(bin.Machine).To(Equal(wantMachine), platform.String())
	for _, p := range bin.Progs {
		g.Expect(p.Type).NotTo(Equal(elf.PT_INTERP), "%s: a static binary has no dynamic loader", platform.String())
	}
	checkSBOM(g, files["manager"].data, files[strings.TrimPrefix(SBOMPath, "/")].data, want.version)
}

type layerFile struct {
	hdr  *tar.Header
	data []byte
}

func layerFiles(g Gomega, l v1.Layer) map[string]layerFile {
	rc, err := l.Uncompressed()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	files := map[string]layerFile{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		g.Expect(err).NotTo(HaveOccurred())
		data, err := io.ReadAll(tr)
		g.Expect(err).NotTo(HaveOccurred())
		files[hdr.Name] = layerFile{hdr: hdr, data: data}
	}
}

func deploymentImages(g Gomega, components string) []string {
	y, err := os.ReadFile(components)
	g.Expect(err).NotTo(HaveOccurred())
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(y), 4096)
	var images []string
	for {
		o := &unstructured.Unstructured{}
		err := dec.Decode(&o.Object)
		if errors.Is(err, io.EOF) {
			return images
		}
		g.Expect(err).NotTo(HaveOccurred())
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			images = append(images, c.(map[string]any)["image"].(string))
		}
	}
}

func mustParse(g Gomega, s string) name.Reference {
	ref, err := name.ParseReference(s)
	g.Expect(err).NotTo(HaveOccurred())
	return ref
}

func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }

// Test_layerTar checks the layer's files, owners and modes, and that it depends on nothing but
// the binary and the time: the same inputs give the same layer digest.
func Test_layerTar(t *testing.T) {
	g := NewWithT(t)
	mtime := time.Unix(1700000000, 0)
	b, err := layerTar([]byte("\x7fELF manager"), []byte(`{"spdxVersion":"SPDX-2.3"}`), mtime)
	g.Expect(err).NotTo(HaveOccurred())
	layer, err := layerFromTar(b)
	g.Expect(err).NotTo(HaveOccurred())

	files := layerFiles(g, layer)
	type want struct {
		mode int64
		uid  int
	}
	got := map[string]want{}
	for n, f := range files {
		got[n] = want{mode: f.hdr.Mode, uid: f.hdr.Uid}
		g.Expect(f.hdr.ModTime.Equal(mtime)).To(BeTrue(), n)
	}
	g.Expect(got).To(Equal(map[string]want{
		"etc/":                        {0o755, 0},
		"etc/group":                   {0o644, 0},
		"etc/passwd":                  {0o644, 0},
		"home/":                       {0o755, 0},
		"home/nonroot/":               {0o700, 65532},
		"manager":                     {0o755, 0},
		"tmp/":                        {0o1777, 0},
		"usr/":                        {0o755, 0},
		"usr/share/":                  {0o755, 0},
		"usr/share/doc/":              {0o755, 0},
		"usr/share/doc/etcd-adapter/": {0o755, 0},
		"usr/share/doc/etcd-adapter/sbom.spdx.json": {0o644, 0},
	}))
	g.Expect(string(files["manager"].data)).To(Equal("\x7fELF manager"))
	g.Expect(string(files["etc/group"].data)).To(ContainSubstring("nonroot:x:65532:"))

	again, err := layerTar([]byte("\x7fELF manager"), []byte(`{"spdxVersion":"SPDX-2.3"}`), mtime)
	g.Expect(err).NotTo(HaveOccurred())
	layer2, err := layerFromTar(again)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(layer2.Digest()).To(Equal(mustDigest(g, layer)))
}

func mustDigest(g Gomega, l v1.Layer) v1.Hash {
	d, err := l.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	return d
}

func Test_sourceDateEpoch(t *testing.T) {
	tests := []struct {
		name      string
		value     string
		want      time.Time
		expectErr bool
	}{
		{name: "Unset is the Unix epoch", value: "", want: time.Unix(0, 0)},
		{name: "Seconds since the epoch are that time", value: "1700000000", want: time.Unix(1700000000, 0)},
		{name: "Anything else is an error", value: "2023-11-14", expectErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := sourceDateEpoch(tt.value)
			if tt.expectErr {
				g.Expect(err).To(MatchError(ContainSubstring("invalid SOURCE_DATE_EPOCH")))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Equal(tt.want)).To(BeTrue(), "got %s", got)
		})
	}
}

func TestOptions_defaultLabels(t *testing.T) {
	outsideGit := t.TempDir()
	tests := []struct {
		name         string
		opts         Options
		wantVersion  string
		wantRevision string // "git" means a commit hash
		expectErr    string
	}{
		{name: "Given labels are kept", opts: Options{Root: ".", Image: "example.com/etcd-adapter:v1", Version: "v0.1.0", Revision: "abc"},
			wantVersion: "v0.1.0", wantRevision: "abc"},
		{name: "In a git checkout the revision is the commit", opts: Options{Root: ".", Image: "example.com/etcd-adapter:v1", Version: "v0.1.0"},
			wantVersion: "v0.1.0", wantRevision: "git"},
		{name: "Without git the version is the image tag and the revision unknown", opts: Options{Root: outsideGit, Image: "example.com/etcd-adapter:v1"},
			wantVersion: "v1", wantRevision: "unknown"},
		{name: "Without git and without a tag there is no version", opts: Options{Root: outsideGit, Image: "example.com/etcd-adapter@sha256:" + strings.Repeat("0", 64)},
			expectErr: "has no tag; pass -version"},
		{name: "An invalid image reference is an error", opts: Options{Root: ".", Image: "Example.com/A B"},
			expectErr: "invalid image reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o := tt.opts
			err := o.defaultLabels(context.Background())
			if tt.expectErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.expectErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(o.Version).To(Equal(tt.wantVersion))
			if tt.wantRevision == "git" {
				g.Expect(o.Revision).To(MatchRegexp(`^[0-9a-f]{40}$`))
			} else {
				g.Expect(o.Revision).To(Equal(tt.wantRevision))
			}
		})
	}
}
