package env

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// CertManagerCRDDir returns cert-manager's own CRD manifests (deploy/crds of its module) at the
// version hack/tools/cert-manager builds, from the repository at repoRoot.
func CertManagerCRDDir(repoRoot string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager")
	cmd.Dir = filepath.Join(repoRoot, "hack", "tools", "cert-manager")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("failed to find cert-manager's module (go list -m in %s): %w", cmd.Dir, err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds"), nil
}
