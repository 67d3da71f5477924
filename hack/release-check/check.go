package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// modulePrefix is the module path of the main module; the nested modules are below it.
const modulePrefix = "github.com/etcd-adapter/etcd-adapter"

// TaggedModules are the directories of the modules that are tagged together (vX.Y.Z,
// pkg/etcd/vX.Y.Z, pkg/k3s/vX.Y.Z). examples/k3sprovider is not tagged: nobody imports it.
var TaggedModules = []string{".", "pkg/etcd", "pkg/k3s"}

// Refusals says why the modules whose go.mod files are given (by path) cannot be tagged version:
// one line per require of a module of this repository at another version. An invalid version,
// or v0.0.0 (the placeholder the requires carry between releases), is an error.
func Refusals(goMods map[string][]byte, version string) ([]string, error) {
	if !semver.IsValid(version) || semver.Canonical(version) != version || version == "v0.0.0" {
		return nil, fmt.Errorf("failed to check the release: version %q is not a release version such as v0.1.0", version)
	}
	var out []string
	for _, path := range slices.Sorted(maps.Keys(goMods)) {
		f, err := modfile.ParseLax(path, goMods[path], nil)
		if err != nil {
			return nil, fmt.Errorf("failed to parse %s: %w", path, err)
		}
		for _, r := range f.Require {
			if !isSibling(r.Mod.Path) || r.Mod.Version == version {
				continue
			}
			out = append(out, fmt.Sprintf("%s requires %s %s, not %s: a module that imports it would not find that version (Go ignores a dependency's replace directives)",
				path, r.Mod.Path, r.Mod.Version, version))
		}
	}
	return out, nil
}

func isSibling(path string) bool {
	return path == modulePrefix || strings.HasPrefix(path, modulePrefix+"/")
}
