// Package releasetool prepares what the install tests (test/clusterctl, test/operator) need to
// build releases of the addon as `make release-manifests` does and hand them to clusterctl's code.
package releasetool

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
)

// KeepGoCaches sets GOMODCACHE, GOCACHE and GOPATH to what `go env` says now. The install tests
// give clusterctl a HOME of their own; the go command test/env runs to find Cluster API's module
// keeps the caches of the real one.
func KeepGoCaches() error {
	for _, name := range []string{"GOMODCACHE", "GOCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			return fmt.Errorf("failed to run go env %s: %w", name, err)
		}
		if err := os.Setenv(name, strings.TrimSpace(string(out))); err != nil {
			return err
		}
	}
	return nil
}

// BuildReleaseManifests builds the project's release-manifests command (what `make
// release-manifests` runs) from repoRoot into dir and returns its path.
func BuildReleaseManifests(repoRoot, dir string) (string, error) {
	bin := filepath.Join(dir, "release-manifests")
	cmd := exec.Command("go", "build", "-o", bin, "./hack/release-manifests") //nolint:gosec // fixed arguments
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failed to build hack/release-manifests: %w\n%s", err, out)
	}
	return bin, nil
}

// AddSeries adds the release series of version v (vMAJOR.MINOR.PATCH) to m, on Cluster API's
// contract, unless m has it: a test's release of another minor than metadata.yaml lists.
func AddSeries(m *clusterctlv1.Metadata, v string) error {
	var major, minor int32
	if _, err := fmt.Sscanf(v, "v%d.%d.", &major, &minor); err != nil {
		return fmt.Errorf("version %s: %w", v, err)
	}
	for _, s := range m.ReleaseSeries {
		if s.Major == major && s.Minor == minor {
			return nil
		}
	}
	m.ReleaseSeries = append(m.ReleaseSeries, clusterctlv1.ReleaseSeries{Major: major, Minor: minor, Contract: clusterv1.GroupVersion.Version})
	return nil
}
