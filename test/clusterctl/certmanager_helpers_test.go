package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/parentdeath"
)

// certManagerBinaries returns the directory holding cert-manager's controller and cainjector:
// CERT_MANAGER_DIR when set (make test sets it), else what hack/build-cert-manager.sh builds into
// (or finds in) the user's cache.
func certManagerBinaries(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("CERT_MANAGER_DIR"); dir != "" {
		return dir
	}
	cache, err := os.UserCacheDir()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	if xdg := os.Getenv("XDG_CACHE_HOME"); xdg != "" {
		cache = xdg
	}
	cmd := exec.Command(filepath.Join(repoRoot, "hack", "build-cert-manager.sh"), filepath.Join(cache, "etcd-adapter", "cert-manager")) //nolint:gosec // the repository's script
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "hack/build-cert-manager.sh")
	return strings.TrimSpace(string(out))
}

// certManagerCRDs returns cert-manager's own CRD manifests (deploy/crds of its module, the version
// hack/tools/cert-manager builds).
func certManagerCRDs(t *testing.T) string {
	t.Helper()
	dir, err := env.CertManagerCRDDir(repoRoot)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return dir
}

// process is one cert-manager component running as its own process, ending with the test.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startProcess runs binary with args, its output in log; it ends with this process
// (parentdeath) and is stopped when t ends.
func startProcess(t *testing.T, binary, log string, args ...string) *process {
	t.Helper()
	g := NewWithT(t)
	f, err := os.Create(log)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	cmd := exec.Command(binary, args...) //nolint:gosec // the test's binaries
	cmd.Stdout, cmd.Stderr = f, f
	parentdeath.Set(cmd)
	g.Expect(cmd.Start()).To(Succeed())
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop() })
	return p
}

// stop ends p with SIGTERM, then SIGKILL after 30 s.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// running reports whether p has not ended.
func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// secretVolume is a Secret's keys as files in a directory, written as the kubelet writes a
// Secret volume (k8s.io/kubernetes pkg/volume/util/atomic_writer.go): the data in a timestamped
// directory, a `..data` symlink swapped to it in one rename, and each key a symlink through
// `..data`, so a reader sees the old files or the new ones, never half of each.
type secretVolume struct {
	dir     string
	version string
}

// write puts the Secret's data into v.dir unless its resourceVersion is the one written last.
func (v *secretVolume) write(s *corev1.Secret) error {
	if s.ResourceVersion == v.version {
		return nil
	}
	data, err := os.MkdirTemp(v.dir, "..data_")
	if err != nil {
		return fmt.Errorf("failed to create the volume's data directory: %w", err)
	}
	for k, b := range s.Data {
		if err := os.WriteFile(filepath.Join(data, k), b, 0o600); err != nil {
			return fmt.Errorf("failed to write %s: %w", k, err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(data), tmp); err != nil {
		return fmt.Errorf("failed to link the volume's data: %w", err)
	}
	old, _ := os.Readlink(filepath.Join(v.dir, "..data"))
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		return fmt.Errorf("failed to swap the volume's data: %w", err)
	}
	for k := range s.Data {
		link := filepath.Join(v.dir, k)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				return fmt.Errorf("failed to link %s: %w", k, err)
			}
		}
	}
	if old != "" {
		_ = os.RemoveAll(filepath.Join(v.dir, old))
	}
	v.version = s.ResourceVersion
	return nil
}

// syncSecretVolume writes the Secret into dir once it exists and then whenever it changes (the
// kubelet syncs a mounted Secret the same way, on its own period), until t ends.
func (m *management) syncSecretVolume(ctx context.Context, t *testing.T, namespace, name, dir string) {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	v := &secretVolume{dir: dir}
	read := func() error {
		s := &corev1.Secret{}
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
			return err
		}
		return v.write(s)
	}
	g.Eventually(read).WithTimeout(2*time.Minute).Should(Succeed(), "Secret %s/%s", namespace, name)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := read(); err != nil && ctx.Err() == nil {
					t.Logf("syncing Secret %s/%s: %v", namespace, name, err)
				}
			}
		}
	}()
}
