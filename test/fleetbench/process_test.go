package fleetbench

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-adapter/etcd-adapter/test/env/managerproc"
)

// managerProcess is the etcd-adapter binary running against the management cluster, with its
// profiler on.
type managerProcess struct {
	*managerproc.Process
	// profiler is the address of its pprof endpoints.
	profiler string
}

// startManagerProcess starts the manager binary with the management cluster's kubeconfig,
// webhooks off, and the given --watch-filter ("all": none), and waits until it is ready.
func startManagerProcess(ctx context.Context, bin managerproc.Binary, dir, shard string, extraArgs ...string) (*managerProcess, error) {
	profiler, err := managerproc.FreeAddr()
	if err != nil {
		return nil, err
	}
	// The manager's log outlives the benchmark's temporary directory in FLEET_PROFILES.
	logDir := dir
	if d := os.Getenv("FLEET_PROFILES"); d != "" {
		logDir = d
	}
	args := []string{"--profiler-address=" + profiler, "-v=1"}
	if shard != "all" {
		args = append(args, "--watch-filter="+shard)
	}
	args = append(args, extraArgs...)
	// FLEET_MANAGER_ARGS adds flags (-v=4 to see every pass).
	args = append(args, strings.Fields(os.Getenv("FLEET_MANAGER_ARGS"))...)
	p, err := bin.Start(ctx, managerproc.Options{
		Log:  filepath.Join(logDir, "manager-"+shard+"-"+strconv.FormatInt(time.Now().Unix(), 10)+".log"),
		Args: args,
		// FLEET_MANAGER_ENV sets variables for the manager alone (GOMEMLIMIT, GODEBUG), not for
		// the apiservers and etcd members, which are Go programs too.
		Env: strings.Fields(os.Getenv("FLEET_MANAGER_ENV")),
	})
	if err != nil {
		return nil, err
	}
	return &managerProcess{Process: p, profiler: profiler}, nil
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
