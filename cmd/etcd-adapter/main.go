// Command etcd-adapter is the etcd-adapter manager: the controllers that keep etcd quorum
// through control-plane Machine deletions and report each Cluster's etcd in a ControlPlaneEtcd,
// and the webhooks (quorum guard, Machine hook). `etcd-adapter --help` lists its flags;
// docs/quick-start.md shows how to install it with clusterctl.
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter/manager"
)

func main() {
	opts := manager.NewOptions()
	logOptions := logs.NewOptions()
	fs := manager.NewFlagSet(opts, logOptions)
	if err := fs.Parse(os.Args[1:]); err != nil {
		// pflag printed the usage for -h.
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "Invalid flags: %v (see --help)\n", err)
		os.Exit(2)
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "Invalid flags: %v\n", err)
		os.Exit(2)
	}

	if err := logsv1.ValidateAndApply(logOptions, nil); err != nil {
		fmt.Fprintf(os.Stderr, "Unable to start the manager: %v\n", err)
		os.Exit(1)
	}
	ctrl.SetLogger(klog.Background())
	log := ctrl.Log.WithName("setup")
	// The Go runtime's soft memory limit at 90% of the container's memory limit (its cgroup):
	// the garbage collector then collects harder as the heap nears the limit instead of letting
	// it grow to twice what is live (GOGC=100) and the Pod be killed. GOMEMLIMIT, or
	// AUTOMEMLIMIT=off or another ratio, in the environment wins; without a cgroup limit
	// nothing changes.
	if _, err := memlimit.Set(memlimit.WithLogger(slog.New(logr.ToSlogHandler(log)))); err != nil {
		log.Error(err, "Unable to set the Go memory limit from the container's; running without")
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "Unable to read the management cluster's kubeconfig")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := manager.Run(ctx, cfg, opts); err != nil {
		log.Error(err, "Manager failed")
		os.Exit(1)
	}
	log.Info("Manager stopped")
}
