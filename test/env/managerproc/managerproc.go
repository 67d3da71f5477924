// Package managerproc runs the etcd-adapter manager binary (cmd/etcd-adapter) as its own process
// against a management cluster, so that a test can end it the way a node or the kubelet does: a
// SIGKILL, which runs no deferred call, releases no Lease and cancels no request.
package managerproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/etcd-adapter/etcd-adapter/test/env/parentdeath"
)

// Binary is the built manager and a kubeconfig of the management cluster beside it.
type Binary struct {
	Path, Kubeconfig string
}

// Build builds cmd/etcd-adapter into dir and writes cfg's kubeconfig there.
func Build(ctx context.Context, dir string, cfg *rest.Config) (Binary, error) {
	b := Binary{Path: filepath.Join(dir, "etcd-adapter"), Kubeconfig: filepath.Join(dir, "kubeconfig")}
	build := exec.CommandContext(ctx, "go", "build", "-o", b.Path, "github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter")
	if out, err := build.CombinedOutput(); err != nil {
		return Binary{}, fmt.Errorf("failed to build the manager: %w: %s", err, out)
	}
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"m": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"a": {ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}},
		Contexts:       map[string]*clientcmdapi.Context{"c": {Cluster: "m", AuthInfo: "a"}},
		CurrentContext: "c",
	}
	if err := clientcmd.WriteToFile(kc, b.Kubeconfig); err != nil {
		return Binary{}, fmt.Errorf("failed to write the kubeconfig: %w", err)
	}
	return b, nil
}

// Process is one running manager.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// Diagnostics is the address of its plain-HTTP /metrics; Log the file its output goes to.
	Diagnostics, Log string
}

// Options shape one manager process.
type Options struct {
	// Log is the file the process's output goes to.
	Log string
	// Args are flags after the ones Start sets (a later flag overrides an earlier one).
	Args []string
	// Env are variables for this process alone (GOMEMLIMIT, GODEBUG), added to this process's.
	Env []string
	// AsDeployed runs the process with Args alone (the rendered Deployment's, their paths and
	// ports made local by the caller): no webhook, diagnostics or profiler flag of Start's, only
	// the kubeconfig and, last so that it wins, the health address Start probes. Diagnostics is
	// then empty: the caller knows where, and with which certificate, the process serves them.
	AsDeployed bool
}

// Start runs the binary with webhooks off, no profiler, plain-HTTP diagnostics on a free port and
// o.Args, and waits until it reports ready. It ends with this process (parentdeath).
func (b Binary) Start(ctx context.Context, o Options) (*Process, error) {
	health, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	diag, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(o.Log)
	if err != nil {
		return nil, fmt.Errorf("failed to create the manager log: %w", err)
	}
	defer func() { _ = log.Close() }()
	args := append([]string{"--kubeconfig=" + b.Kubeconfig, "--enable-webhooks=false",
		"--health-addr=" + health, "--insecure-diagnostics", "--diagnostics-address=" + diag, "--profiler-address="}, o.Args...)
	if o.AsDeployed {
		args = append(append([]string{"--kubeconfig=" + b.Kubeconfig}, o.Args...), "--health-addr="+health)
		diag = ""
	}
	cmd := exec.Command(b.Path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), o.Env...)
	parentdeath.Set(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start the manager: %w", err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), Diagnostics: diag, Log: o.Log}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-p.done:
			if p.err != nil {
				return false, fmt.Errorf("the manager exited: %w", p.err)
			}
			return false, errors.New("the manager exited with status 0 before it was ready")
		default:
		}
		resp, err := http.Get("http://" + health + "/readyz") //nolint:noctx // a local probe
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("the manager did not become ready (log in %s): %w", o.Log, err), p.Kill())
	}
	return p, nil
}

// Done is closed when the process has ended, for whatever reason.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process ended (nil for a clean exit); valid once Done is closed.
func (p *Process) Err() error { return p.err }

// Pid is the process ID, for /proc.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits for the graceful shutdown; after a minute it kills the process.
func (p *Process) Stop() error {
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("failed to stop the manager: %w", err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("the manager exited with an error: %w", p.err)
		}
		return nil
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		return errors.New("the manager did not stop within a minute of SIGTERM")
	}
}

// Kill sends SIGKILL and waits for the process to end; it is safe to call twice.
func (p *Process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("failed to kill the manager: %w", err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("the manager (pid %d) did not end within a minute of SIGKILL", p.cmd.Process.Pid)
	}
}

// Elected reports whether the process leads the Lease named id, from controller-runtime's
// leader_election_master_status gauge on its /metrics.
func (p *Process) Elected(id string) bool {
	resp, err := http.Get("http://" + p.Diagnostics + "/metrics") //nolint:noctx // a local scrape
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	want := fmt.Sprintf("leader_election_master_status{name=%q} 1", id)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == want {
			return true
		}
	}
	return false
}

// FreeAddr returns a loopback address with a port free at the time of the call.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("failed to find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}
