package main

import (
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/test/env/docblock"
)

// pageRegistry is the registry host of docs/quick-start.md's IMG, which the test swaps for its own.
const pageRegistry = "registry.example.com"

// TestQuickStartImage runs docs/quick-start.md's blocks that build and push the image and build
// the components for it, as the page gives them, one after the other as a reader does (the
// second uses the first's $IMG), with one change: the registry host is an in-process registry's
// (go-containerregistry's pkg/registry; a 127.0.0.1 registry is spoken to over HTTP). The blocks
// write out/ in the working directory, so they run in a copy of this checkout, with git, where
// nothing but the environment the test runs in is set: the platforms and labels are the
// Makefile's defaults. The image pulled back from the registry must be the one the layout holds:
// an index of linux/amd64 and linux/arm64 images running /manager as the non-root user, labelled
// with the checkout's version and commit; the components must run $IMG.
func TestQuickStartImage(t *testing.T) {
	g := NewWithT(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	g.Expect(err).NotTo(HaveOccurred())
	docs := filepath.Join("..", "..", "docs")
	push := docblock.ShellBlock(g, docs, "quick-start.md", "make image-push IMG=$IMG")
	manifests := docblock.ShellBlock(g, docs, "quick-start.md", "make release-manifests IMG=$IMG")

	reg := httptest.NewServer(registry.New(registry.Logger(discardLogger())))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	g.Expect(strings.Count(push, pageRegistry)).To(Equal(1), "the block names the registry once, in IMG:\n%s", push)
	img := host + "/etcd-adapter:v0.1.0"
	g.Expect(push).To(ContainSubstring("IMG=" + pageRegistry + "/etcd-adapter:v0.1.0\n"))

	work := copyCheckout(t, g, root)
	script := "set -euo pipefail\n" + strings.Replace(push, pageRegistry, host, 1) + manifests
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = work
	cmd.Env = pageEnv()
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "the quick start's blocks:\n%s\nfailed:\n%s", script, out)

	layoutDir := filepath.Join(work, "out", "image")
	g.Expect(filepath.Join(layoutDir, "oci-layout")).To(BeAnExistingFile(), "make image-push leaves an OCI layout in out/image")
	idx, builtFor, err := LayoutIndex(layoutDir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(builtFor).To(Equal(img))
	digest, err := idx.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring("pushed "+img+"@"+digest.String()), "make image-push says what it pushed")

	pulled, err := remote.Index(mustParse(g, img))
	g.Expect(err).NotTo(HaveOccurred(), "the registry serves $IMG")
	g.Expect(pulled.Digest()).To(Equal(digest), "the registry holds the index of out/image")
	im, err := pulled.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(im.MediaType).To(Equal(types.OCIImageIndex))
	// The copy's git, not the checkout's: describe --dirty writes the index it refreshes.
	version := runGit(t, g, work, "describe", "--tags", "--always", "--dirty")
	want := imageLabels{created: time.Unix(0, 0), version: version, revision: runGit(t, g, root, "rev-parse", "HEAD")}
	var platforms []string
	for _, d := range im.Manifests {
		g.Expect(d.Platform).NotTo(BeNil())
		platforms = append(platforms, d.Platform.String())
		pulledImage, err := pulled.Image(d.Digest)
		g.Expect(err).NotTo(HaveOccurred())
		checkImage(g, pulledImage, *d.Platform, want)
	}
	g.Expect(platforms).To(ConsistOf("linux/amd64", "linux/arm64"))

	// The second block's comment names the files it writes.
	g.Expect(manifests).To(ContainSubstring("# out/addon-components.yaml  out/metadata.yaml"))
	g.Expect(deploymentImages(g, filepath.Join(work, "out", ComponentsFileName))).To(Equal([]string{img}),
		"the components run the image the first block pushed")
	metadata, err := os.ReadFile(filepath.Join(work, "out", "metadata.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.ReadFile(filepath.Join(root, "metadata.yaml"))).To(Equal(metadata), "out/metadata.yaml is the repository's")
}

// pageEnv is the test's environment without the make variables the page's commands leave to
// their defaults, as a reader's shell has none of them.
func pageEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "IMG", "RELEASE_DIR", "IMAGE_DIR", "IMAGE_PLATFORMS", "IMAGE_VERSION", "IMAGE_REVISION", "SOURCE_DATE_EPOCH":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// copyCheckout copies the files of the checkout at root, as they are on disk (committed or not,
// ignored files left out), into a git clone of its commit that shares root's objects, so that
// git describe and rev-parse there say what they say in root, and returns the copy.
func copyCheckout(t *testing.T, g Gomega, root string) string {
	t.Helper()
	work := filepath.Join(t.TempDir(), "etcd-adapter")
	runGit(t, g, root, "clone", "--quiet", "--shared", "--no-checkout", root, work)
	runGit(t, g, work, "reset", "--quiet", runGit(t, g, root, "rev-parse", "HEAD"))
	files := runGit(t, g, root, "ls-files", "--cached", "--others", "--exclude-standard")
	for _, f := range strings.Split(files, "\n") {
		info, err := os.Lstat(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the checkout and not yet committed
		}
		g.Expect(err).NotTo(HaveOccurred())
		b, err := os.ReadFile(filepath.Join(root, f))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.MkdirAll(filepath.Dir(filepath.Join(work, f)), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(work, f), b, info.Mode().Perm())).To(Succeed())
	}
	return work
}

// runGit runs git in dir and returns its output without the trailing newline.
func runGit(t *testing.T, g Gomega, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	var stderr []byte
	if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) {
		stderr = exitErr.Stderr
	}
	g.Expect(err).NotTo(HaveOccurred(), "git %s: %s", strings.Join(args, " "), stderr)
	return strings.TrimSpace(string(out))
}
