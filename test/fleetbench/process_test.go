package fleetbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/etcd-adapter/etcd-adapter/test/env/parentdeath"
)

// managerProcess is the etcd-adapter binary running against the management cluster.
type managerProcess struct {
	cmd  *exec.Cmd
	done chan error
	// diagnostics is the address of the manager's /metrics; profiler its pprof.
	diagnostics, profiler string
}

// buildManager builds cmd/etcd-adapter and writes a kubeconfig for the management cluster cfg
// into dir.
func buildManager(ctx context.Context, cfg *rest.Config, dir string) (string, error) {
	bin := filepath.Join(dir, "etcd-adapter")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failed to build the manager: %w: %s", err, out)
	}
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"m": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"a": {ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}},
		Contexts:       map[string]*clientcmdapi.Context{"c": {Cluster: "m", AuthInfo: "a"}},
		CurrentContext: "c",
	}
	if err := clientcmd.WriteToFile(kc, filepath.Join(dir, "kubeconfig")); err != nil {
		return "", fmt.Errorf("failed to write the kubeconfig: %w", err)
	}
	return bin, nil
}

// startManagerProcess starts the manager binary with the management cluster's kubeconfig,
// webhooks off, and the given --watch-filter ("all": none), and waits until it is ready.
func startManagerProcess(ctx context.Context, bin, dir, shard string, extraArgs ...string) (*managerProcess, error) {
	kubeconfig := filepath.Join(dir, "kubeconfig")
	health, err := freeAddrErr()
	if err != nil {
		return nil, err
	}
	diag, err := freeAddrErr()
	if err != nil {
		return nil, err
	}
	profiler, err := freeAddrErr()
	if err != nil {
		return nil, err
	}
	// The manager's log outlives the benchmark's temporary directory in FLEET_PROFILES.
	logDir := dir
	if d := os.Getenv("FLEET_PROFILES"); d != "" {
		logDir = d
	}
	log, err := os.Create(filepath.Join(logDir, "manager-"+shard+"-"+strconv.FormatInt(time.Now().Unix(), 10)+".log"))
	if err != nil {
		return nil, fmt.Errorf("failed to create the manager log: %w", err)
	}
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--enable-webhooks=false", "--health-addr="+health,
		"--insecure-diagnostics", "--diagnostics-address="+diag, "--profiler-address="+profiler, "-v=1")
	if shard != "all" {
		cmd.Args = append(cmd.Args, "--watch-filter="+shard)
	}
	cmd.Args = append(cmd.Args, extraArgs...)
	// FLEET_MANAGER_ARGS adds flags (-v=4 to see every pass).
	cmd.Args = append(cmd.Args, strings.Fields(os.Getenv("FLEET_MANAGER_ARGS"))...)
	cmd.Stdout, cmd.Stderr = log, log
	// FLEET_MANAGER_ENV sets variables for the manager alone (GOMEMLIMIT, GODEBUG), not for the
	// apiservers and etcd members, which are Go programs too.
	cmd.Env = append(os.Environ(), strings.Fields(os.Getenv("FLEET_MANAGER_ENV"))...)
	// The manager ends with the benchmark process, also when a time limit kills it.
	parentdeath.Set(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start the manager: %w", err)
	}
	p := &managerProcess{cmd: cmd, done: make(chan error, 1), diagnostics: diag, profiler: profiler}
	go func() { p.done <- cmd.Wait() }()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		code, err := statusOf("http://" + health + "/readyz")
		return err == nil && code == 200, nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("the manager did not become ready (log in %s): %w", log.Name(), err), p.stop())
	}
	return p, nil
}

// stop sends SIGTERM and waits for the graceful shutdown.
func (p *managerProcess) stop() error {
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		return fmt.Errorf("failed to stop the manager: %w", err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("the manager exited with an error: %w", err)
		}
		return nil
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		return errors.New("the manager did not stop within a minute of SIGTERM")
	}
}

func freeAddrErr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("failed to find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

func statusOf(url string) (int, error) {
	resp, err := http.Get(url) //nolint:noctx // a local probe
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	return resp.StatusCode, nil
}

func body(url string) (string, error) {
	resp, err := http.Get(url) //nolint:noctx // a local scrape
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
