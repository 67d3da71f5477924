package fleetbench

import (
	"fmt"
	"slices"
	"time"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

type fleetRow struct {
	n, workers         int
	cpuPerMin          float64
	freshP50, freshMax time.Duration
	// oneP50 and oneMax are the freshness of a failure on one workload cluster (its share of
	// Clusters) while the rest of the fleet goes on as before: a member failing somewhere in a
	// fleet, rather than everywhere at once.
	oneP50, oneMax time.Duration
	// freshManagerCores and freshMachineBusy are the manager's CPU (in cores) and the share of
	// the machine's CPUs busy while the freshness measure ran: a manager far below its share of
	// a busy machine waited on the workload clusters, not on itself.
	freshManagerCores, freshMachineBusy float64
	sample
}

// sample is what the manager process holds at one moment.
type sample struct {
	// heapMiB is the Go heap's spans in use after a collection; liveMiB the objects in them.
	// Spans that keep a few objects after many Clusters went count whole in heapMiB.
	rssMiB, heapMiB, liveMiB float64
	fds, goroutines          int
}

func printRow(backend v1alpha1.Backend, row fleetRow) {
	fmt.Printf("fleet %-7s N=%-3d workers/cluster %-4d manager CPU %6.2f s/min (%.3f per cluster)  RSS %6.1f MiB  heap %6.1f MiB (live %6.1f)  fds %4d  goroutines %5d  freshness p50 %v max %v (meanwhile manager %.2f cores, machine %.0f%% busy), one workload cluster p50 %v max %v\n",
		backend, row.n, row.workers, row.cpuPerMin, row.cpuPerMin/float64(row.n), row.rssMiB, row.heapMiB, row.liveMiB, row.fds, row.goroutines,
		row.freshP50.Round(time.Millisecond), row.freshMax.Round(time.Millisecond), row.freshManagerCores, 100*row.freshMachineBusy,
		row.oneP50.Round(time.Millisecond), row.oneMax.Round(time.Millisecond))
}

// printEstimate fits CPU, memory, descriptors and goroutines to a line over the sizes and
// extrapolates to 1,000 clusters.
func printEstimate(backend v1alpha1.Backend, rows []fleetRow) {
	if len(rows) < 2 {
		return
	}
	x := func(r fleetRow) float64 { return float64(r.n) }
	cpuSlope, cpuBase := fit(rows, x, func(r fleetRow) float64 { return r.cpuPerMin })
	rssSlope, rssBase := fit(rows, x, func(r fleetRow) float64 { return r.rssMiB })
	fdSlope, fdBase := fit(rows, x, func(r fleetRow) float64 { return float64(r.fds) })
	gSlope, gBase := fit(rows, x, func(r fleetRow) float64 { return float64(r.goroutines) })
	fmt.Printf("fleet %s slope: %.3f CPU-s/min, %.2f MiB, %.1f fds, %.1f goroutines per cluster (base %.2f CPU-s/min, %.1f MiB, %.0f fds, %.0f goroutines); "+
		"1,000 clusters on one manager ≈ %.1f CPU-s/min (%.2f cores), %.0f MiB, %.0f fds, %.0f goroutines\n",
		backend, cpuSlope, rssSlope, fdSlope, gSlope, cpuBase, rssBase, fdBase, gBase,
		cpuBase+1000*cpuSlope, (cpuBase+1000*cpuSlope)/60, rssBase+1000*rssSlope, fdBase+1000*fdSlope, gBase+1000*gSlope)
}

// printWorkerSlope fits memory and CPU to the worker Nodes per cluster at the largest size.
func printWorkerSlope(backend v1alpha1.Backend, rows []fleetRow) {
	if len(rows) < 2 {
		return
	}
	x := func(r fleetRow) float64 { return float64(r.workers) }
	rssSlope, _ := fit(rows, x, func(r fleetRow) float64 { return r.rssMiB })
	heapSlope, _ := fit(rows, x, func(r fleetRow) float64 { return r.heapMiB })
	cpuSlope, _ := fit(rows, x, func(r fleetRow) float64 { return r.cpuPerMin })
	n := rows[0].n
	fmt.Printf("fleet %s workers: per 100 worker Nodes on each of %d clusters, RSS %+.2f MiB, heap %+.2f MiB, CPU %+.3f s/min (per cluster: %+.3f MiB RSS per 100 workers)\n",
		backend, n, 100*rssSlope, 100*heapSlope, 100*cpuSlope, 100*rssSlope/float64(n))
}

// fit is a least-squares line y = slope*x + base.
func fit(rows []fleetRow, xOf, y func(fleetRow) float64) (slope, base float64) {
	var sx, sy, sxx, sxy float64
	for _, r := range rows {
		x := xOf(r)
		sx, sy, sxx, sxy = sx+x, sy+y(r), sxx+x*x, sxy+x*y(r)
	}
	n := float64(len(rows))
	if d := n*sxx - sx*sx; d != 0 {
		slope = (n*sxy - sx*sy) / d
	}
	return slope, (sy - slope*sx) / n
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

// printGoroutineGrowth prints the stacks that have more goroutines than at the baseline.
func printGoroutineGrowth(backend v1alpha1.Backend, base, now map[string]int) {
	for stack, n := range now {
		if n > base[stack] {
			fmt.Printf("fleet %s goroutines left: +%d %s\n", backend, n-base[stack], stack)
		}
	}
}
