package operator

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-adapter/etcd-adapter/test/env/releasetool"
)

// repoRoot holds config/, metadata.yaml and hack/.
var repoRoot = filepath.Join("..", "..")

var (
	// releaseManifests is the project's release-manifests command (what `make release-manifests`
	// runs), built once for the package's tests.
	releaseManifests string
	// operatorDir holds the operator's manager binary, its CRDs (crd/) and webhook configurations
	// (webhook/), as hack/build-operator.sh lays them out.
	operatorDir string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "etcd-adapter-operator-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := releasetool.KeepGoCaches(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if operatorDir, err = findOperator(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if releaseManifests, err = releasetool.BuildReleaseManifests(repoRoot, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// findOperator returns OPERATOR_DIR when set (`make test-operator` builds the operator first),
// else what hack/build-operator.sh prints, which builds it into the cache on first use and
// reuses it after.
func findOperator() (string, error) {
	if dir := os.Getenv("OPERATOR_DIR"); dir != "" {
		return dir, nil
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("failed to find the cache directory: %w", err)
		}
		cache = filepath.Join(home, ".cache")
	}
	cmd := exec.Command(filepath.Join(repoRoot, "hack", "build-operator.sh"), filepath.Join(cache, "etcd-adapter", "cluster-api-operator")) //nolint:gosec // fixed arguments
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("failed to build the Cluster API Operator with hack/build-operator.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
