package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/repository"

	"github.com/etcd-adapter/etcd-adapter/test/env/docblock"
)

// TestQuickStartLocalRepository runs the quick start's shell snippet that lays out the release
// for clusterctl (docs/quick-start.md, the block that ends in `clusterctl init`) in an empty
// HOME, with `clusterctl` replaced by a shell function that records its arguments, and then
// reads the provider the way `clusterctl init` does, with clusterctl's own configuration and
// local repository code: the snippet must work without ~/.config/cluster-api, and the layout
// must be one clusterctl accepts (repository_local.go), with metadata.yaml beside the
// components.
func TestQuickStartLocalRepository(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	const img = "registry.example.com/etcd-adapter:v0.1.0"

	work := t.TempDir()
	g.Expect(release(filepath.Join("..", ".."), filepath.Join(work, "out"), img)).To(Succeed())
	// What `make image` leaves beside the components; the snippet must not trip over it.
	g.Expect(os.MkdirAll(filepath.Join(work, "out", "image", "blobs"), 0o755)).To(Succeed())

	snippet := docblock.ShellBlock(g, filepath.Join("..", "..", "docs"), "quick-start.md", "clusterctl init")

	argsFile := filepath.Join(work, "clusterctl-args")
	script := "set -euo pipefail\nclusterctl() { printf '%s\\n' \"$@\" > " + argsFile + "; }\n" + snippet
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "the quick start's snippet:\n%s\nfailed:\n%s", snippet, out)

	b, err := os.ReadFile(argsFile)
	g.Expect(err).NotTo(HaveOccurred(), "the snippet ran clusterctl")
	args := strings.Fields(string(b))
	g.Expect(args).To(HaveExactElements("init", "--config", Not(BeEmpty()), "--addon", "etcd-adapter"),
		"the snippet installs the addon with its own clusterctl configuration file")
	configPath := args[2]

	configClient, err := config.New(ctx, configPath)
	g.Expect(err).NotTo(HaveOccurred())
	provider, err := configClient.Providers().Get("etcd-adapter", clusterctlv1.AddonProviderType)
	g.Expect(err).NotTo(HaveOccurred())
	repo, err := repository.New(ctx, provider, configClient)
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl accepts the local repository %s", provider.URL())
	g.Expect(repo.DefaultVersion()).To(Equal("v0.1.0"))

	metadata, err := repo.Metadata(repo.DefaultVersion()).Get(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	series := metadata.GetReleaseSeriesForVersion(version.MustParseSemantic(repo.DefaultVersion()))
	g.Expect(series).NotTo(BeNil(), "metadata.yaml has a release series for %s", repo.DefaultVersion())
	g.Expect(series.Contract).To(Equal("v1beta2"))

	components, err := repo.Components().Get(ctx, repository.ComponentsOptions{Version: repo.DefaultVersion()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(components.ManifestLabel()).To(Equal("addon-etcd-adapter"))
	g.Expect(components.Images()).To(ConsistOf(img))
	g.Expect(components.Variables()).To(ConsistOf(sortedKeys(variableDefaults(g))))
	// clusterctl rendered every variable with its default: the Deployment runs the manager as
	// the components do with no variable set.
	var objs []*unstructured.Unstructured
	for i := range components.Objs() {
		objs = append(objs, &components.Objs()[i])
	}
	g.Expect(deployment(g, objs)).To(Equal(deployment(g, render(g, nil))))
}
