package fleetbench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// machineCPU reads the machine's busy and total CPU time (clock ticks) from /proc/stat.
func machineCPU() (busy, total int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("failed to read the machine's CPU time: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	for i, f := range fields[1:] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("failed to parse /proc/stat line %q: %w", line, err)
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, nil
}

// cpuTicks is the process's user plus system CPU time in clock ticks.
func (p *managerProcess) cpuTicks() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return 0, fmt.Errorf("failed to read the manager's CPU time: %w", err)
	}
	// Fields after the command name (which may hold spaces) start after the last ')'.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("failed to parse /proc/%d/stat: %w", p.Pid(), err)
	}
	return utime + stime, nil
}

// rssMiB is the process's resident memory.
func (p *managerProcess) rssMiB() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, fmt.Errorf("failed to read the manager's memory: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("failed to parse VmRSS %q: %w", rest, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", p.Pid())
}

// sample reads the process's resident memory and open file descriptors from /proc, and its Go
// heap in use and goroutines from its /metrics.
func (p *managerProcess) sample() (sample, error) {
	var s sample
	var err error
	if s.rssMiB, err = p.rssMiB(); err != nil {
		return s, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.Pid()))
	if err != nil {
		return s, fmt.Errorf("failed to list the manager's file descriptors: %w", err)
	}
	s.fds = len(fds)
	// The heap profile with gc=1 runs a garbage collection first, so the heap in use read next
	// is what the manager keeps, not what the collector has yet to free.
	if _, err := body("http://" + p.profiler + "/debug/pprof/heap?gc=1"); err != nil {
		return s, fmt.Errorf("failed to collect the manager's garbage: %w", err)
	}
	text, err := body("http://" + p.Diagnostics + "/metrics")
	if err != nil {
		return s, fmt.Errorf("failed to read the manager's metrics: %w", err)
	}
	heap, err := metricValue(text, "go_memstats_heap_inuse_bytes")
	if err != nil {
		return s, err
	}
	goroutines, err := metricValue(text, "go_goroutines")
	if err != nil {
		return s, err
	}
	live, err := metricValue(text, "go_memstats_heap_alloc_bytes")
	if err != nil {
		return s, err
	}
	s.heapMiB, s.liveMiB, s.goroutines = heap/(1<<20), live/(1<<20), int(goroutines)
	return s, nil
}

// goroutineGroups counts the manager's goroutines by stack (pprof's goroutine profile,
// debug=1), each stack named by its function frames.
func (p *managerProcess) goroutineGroups() (map[string]int, error) {
	text, err := body("http://" + p.profiler + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return nil, fmt.Errorf("failed to read the manager's goroutine profile: %w", err)
	}
	groups := map[string]int{}
	for _, g := range strings.Split(text, "\n\n") {
		lines := strings.Split(strings.TrimSpace(g), "\n")
		count, _, ok := strings.Cut(lines[0], " @ ")
		n, err := strconv.Atoi(count)
		if !ok || err != nil {
			continue
		}
		var frames []string
		for _, l := range lines[1:] {
			// "#\t0x46b2e1\tpkg.Func+0x21\tfile.go:12"
			fields := strings.Split(l, "\t")
			if len(fields) >= 3 {
				name, _, _ := strings.Cut(fields[2], "+0x")
				frames = append(frames, name)
			}
		}
		groups[strings.Join(frames, " < ")] += n
	}
	return groups, nil
}

// metricValue is the value of an unlabelled metric in Prometheus text format.
func metricValue(text, name string) (float64, error) {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				return 0, fmt.Errorf("failed to parse %s %q: %w", name, rest, err)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("no %s in the manager's metrics", name)
}
