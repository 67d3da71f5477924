//go:build soak

package soak

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// settings are the soak's knobs, from the environment (make soak passes them on).
type settings struct {
	seed      uint64
	duration  time.Duration
	scenarios int
	events    int
	backends  []string
}

func readSettings(t *testing.T) (settings, bool) {
	st := settings{seed: uint64(time.Now().UnixNano()), events: 6, backends: allBackends}
	dur, nsc := os.Getenv("SOAK_DURATION"), os.Getenv("SOAK_SCENARIOS")
	if dur == "" && nsc == "" {
		return st, false
	}
	var err error
	if v := os.Getenv("SOAK_SEED"); v != "" {
		if st.seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SOAK_SEED %q is not an unsigned integer: %v", v, err)
		}
	}
	if dur != "" {
		if st.duration, err = time.ParseDuration(dur); err != nil {
			t.Fatalf("SOAK_DURATION %q is not a duration: %v", dur, err)
		}
	}
	if nsc != "" {
		if st.scenarios, err = strconv.Atoi(nsc); err != nil || st.scenarios < 1 {
			t.Fatalf("SOAK_SCENARIOS %q is not a positive integer", nsc)
		}
	}
	if v := os.Getenv("SOAK_EVENTS"); v != "" {
		if st.events, err = strconv.Atoi(v); err != nil || st.events < 1 {
			t.Fatalf("SOAK_EVENTS %q is not a positive integer", v)
		}
	}
	if v := os.Getenv("SOAK_BACKENDS"); v != "" {
		st.backends = strings.Split(v, ",")
		for _, b := range st.backends {
			if !slices.Contains(allBackends, b) {
				t.Fatalf("SOAK_BACKENDS: unknown backend %q (known: %s)", b, strings.Join(allBackends, ","))
			}
		}
	}
	return st, true
}

// eventTimeout bounds one event's play.
const eventTimeout = 3 * time.Minute

// figures are the per-backend counts the soak prints.
type figures struct {
	scenarios, events, violations, waits int
	kinds                                map[string]int
}

// TestSoak plays seeded scenarios until SOAK_DURATION passed or SOAK_SCENARIOS were played, and
// fails when any invariant was broken. Scenario i of a seed picks the same backend and, given
// the same states, the same events; timing still varies from run to run.
func TestSoak(t *testing.T) {
	st, on := readSettings(t)
	if !on {
		t.Fatal("set SOAK_DURATION or SOAK_SCENARIOS (make soak sets SOAK_DURATION=10m)")
	}
	quietLogs()
	fmt.Printf("soak: SOAK_SEED=%d duration=%s scenarios=%d events/scenario=%d backends=%s\n",
		st.seed, st.duration, st.scenarios, st.events, strings.Join(st.backends, ","))
	ctx := t.Context()
	start := time.Now()
	logDir := os.Getenv("SOAK_LOGDIR")
	if logDir == "" {
		var err error
		if logDir, err = os.MkdirTemp("", "etcd-adapter-soak-"); err != nil {
			t.Fatalf("failed to create the log directory: %v", err)
		}
	}
	fmt.Printf("soak: the etcd-adapter replicas' logs are in %s (SOAK_LOGDIR)\n", logDir)
	w, err := startWorld(ctx, logDir)
	if err != nil {
		t.Fatalf("failed to start the management cluster and etcd-adapter: %v", err)
	}
	defer func() {
		if err := w.stop(); err != nil {
			t.Errorf("failed to stop the management cluster: %v", err)
		}
	}()
	fmt.Printf("soak: management cluster and 2 etcd-adapter replicas up in %s\n", time.Since(start).Round(time.Second))
	figs := map[string]*figures{}
	var all []string
	for i := 0; ; i++ {
		if st.scenarios > 0 && i >= st.scenarios || st.duration > 0 && time.Since(start) > st.duration {
			break
		}
		backend := st.backends[i%len(st.backends)]
		f := figs[backend]
		if f == nil {
			f = &figures{kinds: map[string]int{}}
			figs[backend] = f
		}
		s := runScenario(ctx, t, w, st, i, backend, f)
		f.scenarios++
		f.events += s.events
		f.violations += len(s.violations)
		f.waits += len(s.waits)
		for _, v := range s.violations {
			all = append(all, fmt.Sprintf("[%s scenario %d] %s", backend, i, v))
		}
	}
	report(st, figs, time.Since(start))
	if len(all) > 0 {
		t.Errorf("soak seed %d broke %d invariants:\n%s", st.seed, len(all), strings.Join(all, "\n"))
	}
}

func runScenario(ctx context.Context, t *testing.T, w *world, st settings, i int, backend string, f *figures) *scenario {
	began := time.Now()
	s := &scenario{index: i, backend: backend, rng: rand.New(rand.NewPCG(st.seed, uint64(i))), w: w, c: w.mgmt.Client,
		worldRemoved: map[uint64]string{}, stopped: map[string]bool{},
		logf: func(format string, args ...any) {
			fmt.Printf("%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
		}}
	s.logf("scenario %d (%s): starting a %d-member cluster", i, backend, members)
	defer func() {
		if err := s.close(context.WithoutCancel(ctx)); err != nil {
			s.logf("scenario %d: closing: %s", i, firstLine(err.Error()))
		}
		s.logf("scenario %d (%s): %d events, %d violations, %s", i, backend, s.events, len(s.violations), time.Since(began).Round(time.Second))
	}()
	if err := s.start(ctx); err != nil {
		t.Errorf("scenario %d (%s): failed to start: %v", i, backend, err)
		return s
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	k := &checker{s: s}
	done := make(chan struct{}, 2)
	go func() { k.run(sctx); done <- struct{}{} }()
	go func() { s.provider(sctx); done <- struct{}{} }()
	for range st.events {
		ev := s.choose()
		s.events++
		f.kinds[ev.name]++
		s.logf("scenario %d (%s) event %d: %s", i, backend, s.events, ev.name)
		// An event that hangs (a MemberAdd into a cluster that is losing its members) must not
		// stop the soak: it fails as an event, and the checker and converge judge what it left.
		ectx, cancel := context.WithTimeout(ctx, eventTimeout)
		err := ev.play(s, ectx)
		cancel()
		if err != nil {
			s.logf("  %s failed: %s", ev.name, firstLine(err.Error()))
		}
		s.pause(ctx)
	}
	s.converge(ctx)
	cancel()
	<-done
	<-done
	s.logf("scenario %d: checker took %d samples", i, k.samples)
	return s
}

// quietLogs keeps the controllers' logs (klog) out of the soak's output unless SOAK_VERBOSE is
// set: the soak prints its own events and findings.
func quietLogs() {
	if os.Getenv("SOAK_VERBOSE") != "" {
		return
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}

// choose picks an event that applies now, seeded.
func (s *scenario) choose() event {
	var ok []event
	for _, e := range events {
		if slices.Contains(e.backends, s.backend) && e.applies(s) {
			ok = append(ok, e)
		}
	}
	return ok[s.rng.IntN(len(ok))]
}

func report(st settings, figs map[string]*figures, took time.Duration) {
	fmt.Printf("\nsoak: SOAK_SEED=%d ran %s\n", st.seed, took.Round(time.Second))
	fmt.Printf("%-8s %9s %7s %10s %6s  %s\n", "backend", "scenarios", "events", "violations", "waits", "event kinds")
	for _, b := range st.backends {
		f := figs[b]
		if f == nil {
			continue
		}
		var kinds []string
		for k, n := range f.kinds {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		}
		slices.Sort(kinds)
		fmt.Printf("%-8s %9d %7d %10d %6d  %s\n", b, f.scenarios, f.events, f.violations, f.waits, strings.Join(kinds, " "))
	}
}
