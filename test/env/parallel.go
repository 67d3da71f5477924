package env

import (
	"flag"
	"strconv"
)

// DefaultTestParallel sets -test.parallel to n unless the command line gave it. Call it from
// TestMain after flag.Parse. Suites of real components mostly wait (apiserver start, etcd's
// 5 s reconfiguration window, K3s ticks) rather than compute, so go test's default of
// GOMAXPROCS would leave a 2-core machine idle.
func DefaultTestParallel(n int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
