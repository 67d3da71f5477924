package env

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/test/env/parentdeath"
)

const (
	// killHelperEnvVar, when set, makes this test binary the helper of
	// TestKilledTestBinary_leavesNoServers instead of running tests (see TestMain).
	killHelperEnvVar = "ETCD_ADAPTER_TEST_ENV_KILL_HELPER"

	// pidsPrefix starts the line on which the helper prints its environment's PIDs.
	pidsPrefix = "environment PIDs:"

	// helperStartTimeout bounds the helper's start of kube-apiserver and etcd (twice the
	// apiserver, for the restart) on a busy machine.
	helperStartTimeout = 3 * controlPlaneTimeout

	// orphanTimeout bounds how long the environment's processes may take to end after the test
	// binary that started them was killed. The kernel sends the parent-death signal as the
	// process ends, so they end at once; the bound only allows for a busy machine.
	orphanTimeout = time.Minute
)

// TestKilledTestBinary_leavesNoServers starts this test binary again as a helper that starts an
// APIServer (etcd and kube-apiserver, the apiserver restarted once through StopServing and
// StartServing), prints the PIDs of those processes and blocks, as a test does mid-run. It kills
// the helper with SIGKILL, as a `go test -timeout` panic or a CI time limit ends a test binary
// without running any cleanup, and checks that every process the helper started ends too.
func TestKilledTestBinary_leavesNoServers(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), helperStartTimeout)
	defer cancel()

	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), killHelperEnvVar+"=1")
	// The helper blocks until its stdin closes, and ends with this process if it is killed.
	stdin, err := helper.StdinPipe()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = stdin.Close() }()
	stdout, err := helper.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	var stderr strings.Builder
	helper.Stderr = &stderr
	parentdeath.Set(helper)
	g.Expect(helper.Start()).To(Succeed())
	waited := false
	defer func() {
		if !waited {
			_ = helper.Process.Kill()
			_ = helper.Wait()
		}
	}()

	pids, err := readPIDs(ctx, stdout)
	g.Expect(err).NotTo(HaveOccurred(), "helper output: %s", stderr.String())
	procs := make([]process, 0, len(pids))
	for _, pid := range pids {
		p, err := readProcess(pid)
		g.Expect(err).NotTo(HaveOccurred())
		procs = append(procs, p)
	}
	// Whatever the outcome, nothing this test started may outlive it.
	t.Cleanup(func() {
		for _, p := range procs {
			if p.alive() {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
	})
	var names []string
	for _, p := range procs {
		names = append(names, p.name)
	}
	g.Expect(names).To(ConsistOf("etcd", "kube-apiserver"), "the helper's processes %v", pids)
	t.Logf("Helper %d started %v (%v)", helper.Process.Pid, pids, names)

	g.Expect(helper.Process.Signal(syscall.SIGKILL)).To(Succeed())
	err = helper.Wait()
	waited = true
	var exit *exec.ExitError
	g.Expect(errors.As(err, &exit)).To(BeTrue(), "the helper must have been killed: %v", err)
	g.Expect(exit.Sys().(syscall.WaitStatus).Signal()).To(Equal(syscall.SIGKILL))

	g.Eventually(func() []string {
		var alive []string
		for _, p := range procs {
			if p.alive() {
				alive = append(alive, fmt.Sprintf("%s (PID %d)", p.name, p.pid))
			}
		}
		return alive
	}).WithTimeout(orphanTimeout).WithPolling(100*time.Millisecond).Should(BeEmpty(),
		"kube-apiserver and etcd must end with the test binary that started them")
}

// readPIDs reads the helper's output until the line with its environment's PIDs.
func readPIDs(ctx context.Context, r io.Reader) ([]int, error) {
	type result struct {
		pids []int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			rest, ok := strings.CutPrefix(sc.Text(), pidsPrefix)
			if !ok {
				continue
			}
			var pids []int
			for _, f := range strings.Fields(rest) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					done <- result{err: fmt.Errorf("failed to parse the helper's PID %q: %w", f, err)}
					return
				}
				pids = append(pids, pid)
			}
			done <- result{pids: pids}
			// Keep reading, so that the helper never blocks on a full pipe.
			_, _ = io.Copy(io.Discard, r)
			return
		}
		err := errors.New("the helper ended without printing its PIDs")
		if sc.Err() != nil {
			err = fmt.Errorf("%w: %w", err, sc.Err())
		}
		done <- result{err: err}
	}()
	select {
	case res := <-done:
		return res.pids, res.err
	case <-ctx.Done():
		return nil, fmt.Errorf("failed to read the helper's PIDs: %w", context.Cause(ctx))
	}
}

// runKillHelper is the helper's whole life: start an APIServer, restart its kube-apiserver,
// print the PIDs of this process's children and block until stdin closes (or the process is
// killed, which is the point). It returns the exit code.
func runKillHelper() int {
	s, err := StartAPIServer(APIServerOptions{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed to start the APIServer: %v\n", err)
		return 1
	}
	defer func() { _ = s.Stop() }()
	if err := s.StopServing(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	if err := s.StartServing(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	pids, err := childPIDs()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	line := pidsPrefix
	for _, pid := range pids {
		line += " " + strconv.Itoa(pid)
	}
	fmt.Println(line)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// process identifies a process by PID and start time, so that a PID reused by another process
// is not mistaken for it.
type process struct {
	pid       int
	name      string
	startTime string
}

// readProcess reads pid's name and start time from /proc.
func readProcess(pid int) (process, error) {
	fields, name, err := procStat(pid)
	if err != nil {
		return process{}, err
	}
	// Fields after the name: state (3), ppid (4), ..., starttime (22), counted from 1 with pid
	// and name as 1 and 2.
	return process{pid: pid, name: name, startTime: fields[19]}, nil
}

// alive reports whether the process still runs: it exists, is not a zombie (a process that
// ended and was not reaped yet; its new parent may not reap it soon), and is the same process.
func (p process) alive() bool {
	fields, _, err := procStat(p.pid)
	return err == nil && fields[0] != "Z" && fields[19] == p.startTime
}

// procStat returns the fields of /proc/<pid>/stat after the name, and the name.
func procStat(pid int) ([]string, string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, "", fmt.Errorf("failed to read the state of process %d: %w", pid, err)
	}
	s := string(data)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return nil, "", fmt.Errorf("failed to parse /proc/%d/stat: %q", pid, s)
	}
	fields := strings.Fields(s[closing+1:])
	if len(fields) < 20 {
		return nil, "", fmt.Errorf("failed to parse /proc/%d/stat: %q", pid, s)
	}
	return fields, s[open+1 : closing], nil
}
