package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// progressInterval is how often the asset build reports that it is still going.
const progressInterval = 15 * time.Second

// ensureAssets makes sure kube-apiserver and etcd are built, building them with
// hack/build-assets.sh (from the Go module proxy, into the same cache `make test` uses) when they
// are not, and reporting progress meanwhile (best effort: an error writing to out is dropped). It
// sets KUBEBUILDER_ASSETS for the environment.
func ensureAssets(ctx context.Context, root string, out io.Writer) error {
	if dir, err := env.AssetsDir(); err == nil {
		return os.Setenv(env.AssetsEnvVar, dir)
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("failed to find the assets cache: %w", err)
		}
		cache = filepath.Join(home, ".cache")
	}
	cache = filepath.Join(cache, "etcd-adapter", "assets")
	_, _ = fmt.Fprintf(out, "First run: building kube-apiserver %s and etcd %s from the Go module proxy into %s (about 8 to 9 minutes on 2 idle cores, once).\n",
		env.KubernetesVersion, env.EtcdVersion, cache)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-assets.sh"), cache)
	cmd.Dir = root
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("failed to capture the asset build's output: %w", err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to start hack/build-assets.sh: %w", err)
	}
	var mu sync.Mutex
	step := "starting"
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			mu.Lock()
			step = s.Text()
			mu.Unlock()
			_, _ = fmt.Fprintf(out, "  [%s] %s\n", time.Since(start).Round(time.Second), s.Text())
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(progressInterval)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("failed to build the test binaries (hack/build-assets.sh): %w", err)
			}
			_, _ = fmt.Fprintf(out, "  built in %s\n", time.Since(start).Round(time.Second))
			return os.Setenv(env.AssetsEnvVar, strings.TrimSpace(stdout.String()))
		case <-tick.C:
			mu.Lock()
			_, _ = fmt.Fprintf(out, "  [%s] still going: %s\n", time.Since(start).Round(time.Second), step)
			mu.Unlock()
		}
	}
}

// repoRoot finds the repository root (the directory with go.mod) from the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("failed to get the working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("failed to find the repository root (go.mod) above the working directory")
		}
		dir = parent
	}
}
