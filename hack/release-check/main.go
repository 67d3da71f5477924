// Command release-check refuses to let the modules of this repository be tagged at a version
// while a go.mod of a tagged module requires another module of the repository at any other
// version. Go ignores the replace directives of a dependency's go.mod (go.dev/ref/mod#go-mod-file-replace),
// so a tagged pkg/k3s (or main module) that requires pkg/etcd v0.0.0 through a replace cannot be
// built by a provider that imports it. CHANGELOG.md's "Releasing the Go modules" gives the steps.
//
//	go run ./hack/release-check -version v0.1.0
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", ".", "repository root")
	version := flag.String("version", "", "the version about to be tagged, e.g. v0.1.0")
	flag.Parse()
	refusals, err := run(*root, *version)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, r := range refusals {
		fmt.Fprintln(os.Stderr, r)
	}
	if len(refusals) > 0 {
		os.Exit(1)
	}
	fmt.Printf("every module of this repository requires its siblings at %s\n", *version)
}

func run(root, version string) ([]string, error) {
	files := map[string][]byte{}
	for _, dir := range TaggedModules {
		path := filepath.Join(dir, "go.mod")
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil, fmt.Errorf("failed to read %s: %w", path, err)
		}
		files[path] = data
	}
	return Refusals(files, version)
}
