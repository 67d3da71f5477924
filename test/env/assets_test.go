package env

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestAssetsDir(t *testing.T) {
	t.Run("Missing binaries are an error that tells how to build them", func(t *testing.T) {
		g := NewWithT(t)
		t.Setenv(AssetsEnvVar, t.TempDir())
		_, err := AssetsDir()
		g.Expect(err).To(MatchError(ContainSubstring("run `make envtest-assets`")))
	})
	t.Run("A non-executable binary is an error", func(t *testing.T) {
		g := NewWithT(t)
		dir := t.TempDir()
		writeAssets(g, dir, 0o600, assetBinaries...)
		t.Setenv(AssetsEnvVar, dir)
		_, err := AssetsDir()
		g.Expect(err).To(MatchError(ContainSubstring("is not an executable file")))
	})
	t.Run("A directory with both binaries but without their parent-death wrappers is an error that tells how to build them", func(t *testing.T) {
		g := NewWithT(t)
		dir := t.TempDir()
		writeAssets(g, dir, 0o700, "kube-apiserver", "etcd")
		t.Setenv(AssetsEnvVar, dir)
		_, err := AssetsDir()
		g.Expect(err).To(MatchError(ContainSubstring("run `make envtest-assets`")))
		g.Expect(err).To(MatchError(ContainSubstring(filepath.Join(dir, "parent-death", "kube-apiserver"))))
	})
	t.Run("A directory with both binaries and their wrappers is returned", func(t *testing.T) {
		g := NewWithT(t)
		dir := t.TempDir()
		writeAssets(g, dir, 0o700, assetBinaries...)
		t.Setenv(AssetsEnvVar, dir)
		g.Expect(AssetsDir()).To(Equal(dir))
	})
	t.Run("Without KUBEBUILDER_ASSETS the versioned cache directory is used", func(t *testing.T) {
		g := NewWithT(t)
		t.Setenv(AssetsEnvVar, "")
		t.Setenv("XDG_CACHE_HOME", "/cache")
		g.Expect(defaultAssetsDir()).To(Equal("/cache/etcd-adapter/assets/k8s-v1.36.3-etcd-v3.6.14"))
	})
}

// writeAssets writes empty files with mode perm at the given paths under dir.
func writeAssets(g Gomega, dir string, perm os.FileMode, names ...string) {
	for _, name := range names {
		path := filepath.Join(dir, name)
		g.Expect(os.MkdirAll(filepath.Dir(path), 0o700)).To(Succeed())
		g.Expect(os.WriteFile(path, nil, perm)).To(Succeed())
	}
}

// TestAssetVersions_matchBuildScript keeps the versions and the wrapper directory in this
// package, in hack/build-assets.sh and in the hack/tools modules in step: a mismatch would make
// AssetsDir look for a directory the build never fills.
func TestAssetVersions_matchBuildScript(t *testing.T) {
	files := map[string][]string{
		"../../hack/build-assets.sh": {
			"K8S_VERSION=" + KubernetesVersion,
			"ETCD_VERSION=" + EtcdVersion,
			`wrappers="${dest}/` + wrapperDir + `"`,
		},
		"../../hack/tools/kube-apiserver/go.mod": {"k8s.io/kubernetes " + KubernetesVersion},
		"../../hack/tools/etcd/go.mod":           {"go.etcd.io/etcd/server/v3 " + EtcdVersion},
	}
	for path, wants := range files {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			data, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred())
			for _, want := range wants {
				g.Expect(string(data)).To(ContainSubstring(want))
			}
		})
	}
}
