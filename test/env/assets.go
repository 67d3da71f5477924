package env

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

const (
	// KubernetesVersion is the version of the kube-apiserver binary that `make envtest-assets`
	// builds. Keep it in step with hack/build-assets.sh.
	KubernetesVersion = "v1.36.3"

	// EtcdVersion is the version of the etcd binary that `make envtest-assets` builds. Keep it in
	// step with hack/build-assets.sh.
	EtcdVersion = "v3.6.14"

	// AssetsEnvVar names the directory that holds the kube-apiserver and etcd binaries. It is the
	// variable controller-runtime's envtest reads too.
	AssetsEnvVar = "KUBEBUILDER_ASSETS"
)

// wrapperDir is the assets directory's subdirectory of parent-death wrappers, one per binary,
// that hack/build-assets.sh installs (see test/env/parentdeath).
const wrapperDir = "parent-death"

// assetBinaries are the binaries envtest starts and the wrappers it starts them through; all of
// them must be in the assets directory.
var assetBinaries = []string{"kube-apiserver", "etcd", wrapper("kube-apiserver"), wrapper("etcd")}

// wrapper returns the path, relative to the assets directory, of the parent-death wrapper that
// starts binary.
func wrapper(binary string) string { return filepath.Join(wrapperDir, binary) }

// AssetsDir returns the directory with the kube-apiserver and etcd binaries and their parent-death
// wrappers: $KUBEBUILDER_ASSETS
// if set, otherwise the versioned directory in the default cache that `make envtest-assets`
// fills. It fails, telling the user to run `make envtest-assets`, if a binary is missing: a test
// environment without its binaries is an error, never a reason to skip.
func AssetsDir() (string, error) {
	dir := os.Getenv(AssetsEnvVar)
	if dir == "" {
		var err error
		if dir, err = defaultAssetsDir(); err != nil {
			return "", err
		}
	}
	for _, name := range assetBinaries {
		if err := checkExecutable(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("test binaries missing, run `make envtest-assets`: %w", err)
		}
	}
	return dir, nil
}

// defaultAssetsDir mirrors the Makefile's ASSETS_CACHE default and hack/build-assets.sh's layout.
func defaultAssetsDir() (string, error) {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("failed to find the default assets directory (set %s): %w", AssetsEnvVar, err)
		}
		cache = filepath.Join(home, ".cache")
	}
	version := fmt.Sprintf("k8s-%s-etcd-%s", KubernetesVersion, EtcdVersion)
	return filepath.Join(cache, "etcd-adapter", "assets", version), nil
}

func checkExecutable(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("failed to find %s: %w", path, err)
	}
	if info.IsDir() || info.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file: %w", path, fs.ErrPermission)
	}
	return nil
}
