package clusterctl

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// releaseManifests is the project's release-manifests command (what `make release-manifests`
// runs), built once for the package's tests.
var releaseManifests string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "etcd-adapter-clusterctl-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// The tests give clusterctl a HOME of their own; the go command that test/env runs to find
	// Cluster API's module keeps the caches of the real one.
	for _, name := range []string{"GOMODCACHE", "GOCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "failed to run go env %s: %v\n", name, err)
			return 1
		}
		if err := os.Setenv(name, strings.TrimSpace(string(out))); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	releaseManifests = filepath.Join(dir, "release-manifests")
	cmd := exec.Command("go", "build", "-o", releaseManifests, "./hack/release-manifests") //nolint:gosec // fixed arguments
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "failed to build hack/release-manifests: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
