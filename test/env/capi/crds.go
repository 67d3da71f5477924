package capi

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"golang.org/x/mod/module"
)

// modulePath is the Go module that ships Cluster API's core controllers and CRD manifests.
const modulePath = "sigs.k8s.io/cluster-api"

// CoreCRDDir returns the directory with Cluster API's core CRD manifests (Cluster, Machine,
// MachineHealthCheck, ... in v1beta2) of exactly the cluster-api module version the code is
// built with, inside the Go module cache.
//
// Note: test binaries carry no dependency list in their build info, so there the module is found
// with `go list -m`, which needs the working directory inside this repository (as under
// `go test`).
func CoreCRDDir() (string, error) {
	dir, err := moduleDir()
	if err != nil {
		return "", err
	}
	crds := filepath.Join(dir, "core", "config", "crd", "bases")
	if _, err := os.Stat(crds); err != nil {
		return "", fmt.Errorf("failed to find Cluster API CRDs (try `go mod download %s`): %w", modulePath, err)
	}
	return crds, nil
}

// moduleDir finds the cluster-api module in the build info (honouring a replace) and maps it
// into GOMODCACHE, or asks `go list -m` when the build info has no dependency list.
func moduleDir() (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return goListModuleDir()
	}
	for _, dep := range info.Deps {
		if dep.Path != modulePath {
			continue
		}
		if dep.Replace != nil {
			dep = dep.Replace
		}
		if filepath.IsAbs(dep.Path) || strings.HasPrefix(dep.Path, ".") {
			return dep.Path, nil
		}
		return moduleCacheDir(dep.Path, dep.Version)
	}
	return goListModuleDir()
}

func goListModuleDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", modulePath).Output()
	if err != nil {
		return "", fmt.Errorf("failed to find the %s module with `go list -m`: %w", modulePath, err)
	}
	dir := string(bytes.TrimSpace(out))
	if dir == "" {
		return "", fmt.Errorf("failed to find the %s module: not downloaded (try `go mod download %s`)", modulePath, modulePath)
	}
	return dir, nil
}

func moduleCacheDir(path, version string) (string, error) {
	cache, err := goModCache()
	if err != nil {
		return "", err
	}
	escPath, err := module.EscapePath(path)
	if err != nil {
		return "", fmt.Errorf("failed to escape module path %s: %w", path, err)
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return "", fmt.Errorf("failed to escape module version %s: %w", version, err)
	}
	return filepath.Join(cache, escPath+"@"+escVersion), nil
}

func goModCache() (string, error) {
	if dir := os.Getenv("GOMODCACHE"); dir != "" {
		return dir, nil
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("failed to run `go env GOMODCACHE`: %w", err)
	}
	return string(bytes.TrimSpace(out)), nil
}
