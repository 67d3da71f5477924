// Command etcd-adapter is the etcd-adapter manager: the controllers that keep etcd quorum
// through control-plane Machine deletions and report each Cluster's etcd in a ControlPlaneEtcd,
// and the webhooks (quorum guard, Machine hook). `etcd-adapter --help` lists its flags;
// docs/quick-start.md shows how to install it with clusterctl.
package main

import (
	"errors"
	"fmt"
	"os"

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
