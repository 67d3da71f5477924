package fleetbench

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// saveHeapProfile writes the manager's heap profile (for `go tool pprof`) and its goroutines
// into FLEET_PROFILES (when set), named after the sample.
func saveHeapProfile(proc *managerProcess, name string) error {
	dir := os.Getenv("FLEET_PROFILES")
	if dir == "" {
		return nil
	}
	profile, err := body("http://" + proc.profiler + "/debug/pprof/heap?gc=1")
	if err != nil {
		return fmt.Errorf("failed to read the manager's heap profile: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "heap-"+name+".pb.gz"), []byte(profile), 0o600); err != nil {
		return err
	}
	stacks, err := body("http://" + proc.profiler + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return fmt.Errorf("failed to read the manager's goroutine profile: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "goroutines-"+name+".txt"), []byte(stacks), 0o600)
}

// profileCPU starts a CPU profile of the manager over the next d, saved into FLEET_PROFILES (when
// set) as cpu-<name>.pb.gz; the returned wait blocks until it is written.
func profileCPU(proc *managerProcess, name string, d time.Duration) (wait func() error) {
	dir := os.Getenv("FLEET_PROFILES")
	if dir == "" {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() {
		profile, err := body(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", proc.profiler, max(1, int(d.Seconds()))))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "cpu-"+name+".pb.gz"), []byte(profile), 0o600)
		}
		done <- err
	}()
	return func() error { return <-done }
}

// saveMetrics writes the manager's /metrics into FLEET_PROFILES (when set).
func (f *fleet) saveMetrics(proc *managerProcess) error {
	dir := os.Getenv("FLEET_PROFILES")
	if dir == "" {
		return nil
	}
	text, err := body("http://" + proc.Diagnostics + "/metrics")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("metrics-%s-N%d.txt", f.backend, f.n)), []byte(text), 0o600)
}
