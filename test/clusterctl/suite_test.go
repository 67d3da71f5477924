package clusterctl

import (
	"fmt"
	"os"
	"testing"

	"github.com/etcd-adapter/etcd-adapter/test/env/releasetool"
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
	if err := releasetool.KeepGoCaches(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if releaseManifests, err = releasetool.BuildReleaseManifests(repoRoot, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
