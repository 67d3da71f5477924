package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

var repoRoot = filepath.Join("..", "..")

// toolsDir returns the directory holding promtool and promql-metrics: PROMTOOL_DIR when set
// (`make test` builds them first), else what hack/build-promtool.sh prints, which builds them
// into the cache on first use and reuses them after.
func toolsDir(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	if dir := os.Getenv("PROMTOOL_DIR"); dir != "" {
		return dir
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		g.Expect(err).NotTo(HaveOccurred())
		cache = filepath.Join(home, ".cache")
	}
	cmd := exec.Command(filepath.Join(repoRoot, "hack", "build-promtool.sh"), filepath.Join(cache, "etcd-adapter", "promtool"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	g.Expect(err).NotTo(HaveOccurred(), "hack/build-promtool.sh failed")
	return strings.TrimSpace(string(out))
}
