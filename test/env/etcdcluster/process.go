package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/etcd-adapter/etcd-adapter/test/env/parentdeath"
)

// Timing of a member run as a process of its own (Options.Binary).
const (
	// readyPoll is how often a starting process is asked whether it serves clients.
	readyPoll = 100 * time.Millisecond
	// stopGrace is how long Stop lets a process shut down after SIGTERM before it is killed.
	stopGrace = 10 * time.Second
	// logTail is how much of a process's log an error about it quotes.
	logTail = 2 << 10
)

// process is a member run as an etcd process of its own, from the binary Options.Binary names,
// with the flags etcd's own documentation gives for a TLS cluster (etcd.io/docs, "Transport
// security model") and the settings embedConfig gives an in-process member.
type process struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	// voter is set once the member reported itself a voter: a voter never becomes a learner.
	voter atomic.Bool
}

// processArgs are the etcd flags of the member, the counterpart of embedConfig.
func (m *Member) processArgs() []string {
	s := m.settings
	advertise := []string{m.client.String()}
	for _, u := range m.advertise {
		advertise = append(advertise, u.String())
	}
	args := []string{
		"--name=" + m.Name(),
		"--data-dir=" + m.DataDir(),
		"--listen-client-urls=" + m.client.String(),
		"--advertise-client-urls=" + strings.Join(advertise, ","),
		"--listen-peer-urls=" + m.peer.String(),
		"--initial-advertise-peer-urls=" + m.peer.String(),
		"--initial-cluster=" + m.initialCluster,
		"--initial-cluster-state=" + m.clusterState,
		"--initial-cluster-token=" + s.token,
		"--cert-file=" + filepath.Join(m.certDir(), "server.crt"),
		"--key-file=" + filepath.Join(m.certDir(), "server.key"),
		"--trusted-ca-file=" + s.caFile,
		"--client-cert-auth=true",
		"--peer-cert-file=" + filepath.Join(m.certDir(), "peer.crt"),
		"--peer-key-file=" + filepath.Join(m.certDir(), "peer.key"),
		"--peer-trusted-ca-file=" + s.caFile,
		"--peer-client-cert-auth=true",
		"--heartbeat-interval=" + strconv.FormatUint(uint64(s.tickMs), 10),
		"--election-timeout=" + strconv.FormatUint(uint64(s.electionMs), 10),
		"--strict-reconfig-check=" + strconv.FormatBool(!s.looseReconfig),
		"--log-level=error",
		"--enable-grpc-gateway=false",
		"--unsafe-no-fsync=true",
	}
	if s.quotaBackendBytes != 0 {
		args = append(args, "--quota-backend-bytes="+strconv.FormatInt(s.quotaBackendBytes, 10))
	}
	return args
}

// startProcess starts the member's etcd process; it does not wait for it to join. The process
// ends with the test process (test/env/parentdeath) and logs to etcd.log in the member's
// directory, quoted by errors about it.
func (m *Member) startProcess() (*process, error) {
	p := &process{log: filepath.Join(m.dir, "etcd.log"), done: make(chan struct{})}
	log, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("failed to open the log of etcd member %s: %w", m.Name(), err)
	}
	defer func() { _ = log.Close() }()
	p.cmd = exec.Command(m.settings.binary, m.processArgs()...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	parentdeath.Set(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start etcd member %s from %s: %w", m.Name(), m.settings.binary, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits until the process ended.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop sends SIGTERM, as systemd stopping etcd does, and kills the process when it has not
// ended after stopGrace.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		p.kill()
	}
}

// tail is the end of the process's log, for an error message.
func (p *process) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) > logTail {
		b = b[len(b)-logTail:]
	}
	return strings.TrimSpace(string(b))
}

// waitProcessReady blocks until the member's process serves clients, and learns its member
// ID. etcd serves its client port only once the member published itself through raft (embed's
// serveCtx.serve waits for ReadyNotify), so a Status answered by this member alone says what
// ReadyNotify says in process.
func (m *Member) waitProcessReady(ctx context.Context, p *process) error {
	var last error
	for {
		select {
		case <-p.done:
			return fmt.Errorf("etcd member %s (%s) ended while starting: %s", m.Name(), m.settings.binary, p.tail())
		case <-ctx.Done():
			return fmt.Errorf("etcd member %s not ready: %w", m.Name(), errors.Join(context.Cause(ctx), last))
		default:
		}
		id, version, err := m.status(ctx)
		if err == nil {
			if want := m.settings.wantVersion; want != "" && version != want {
				return fmt.Errorf("etcd member %s runs etcd %s from %s, not %s (%s)", m.Name(), version, m.settings.binary, want, VersionEnvVar)
			}
			m.mu.Lock()
			m.id = id
			m.mu.Unlock()
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
		case <-p.done:
		case <-time.After(readyPoll):
		}
	}
}

// status asks the member alone for its status and returns its member ID and etcd version.
func (m *Member) status(ctx context.Context) (uint64, string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cli, err := m.NewClient(ctx)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.Status(ctx, m.ClientURL())
	if err != nil {
		return 0, "", err
	}
	return resp.Header.MemberId, resp.Version, nil
}

// processStatus asks the running process alone for the leader it knows and whether it is a
// learner; a member that does not answer within a second knows no leader and is no voter.
func (m *Member) processStatus() (leader uint64, learner bool, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cli, err := m.NewClient(ctx)
	if err != nil {
		return 0, false, false
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.Status(ctx, m.ClientURL())
	if err != nil {
		return 0, false, false
	}
	return resp.Leader, resp.IsLearner, true
}
