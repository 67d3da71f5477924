package env

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of utime and stime in /proc/<pid>/stat; it is 100 on
// every architecture Go supports on Linux.
const clockTicks = 100

// ProcessCPU returns the CPU time (user and system) the kube-apiserver process has used so far,
// for benchmarks that count the apiserver's share of a piece of work. The process is the one
// whose command line names this apiserver's certificate directory. Linux only; granularity
// 10 ms.
func (s *APIServer) ProcessCPU() (time.Duration, error) {
	pid, err := s.pid()
	if err != nil {
		return 0, err
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("failed to read the kube-apiserver's CPU time: %w", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces; utime and stime are
	// fields 14 and 15, the 12th and 13th after it.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, stat)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// pid finds the kube-apiserver process started with this apiserver's certificate directory.
func (s *APIServer) pid() (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("failed to list processes: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "kube-apiserver" && strings.Contains(string(cmdline), s.certDir) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no kube-apiserver process with certificate directory %s", s.certDir)
}
