// Command etcd-adapter-demo is the README's main job (`make demo`, `make run`): it starts
// etcd-adapter's playground and plays the narrated scenario of package test/demo.
//
//	go run ./test/demo/cmd/etcd-adapter-demo [--keep-running] [--write-kubeconfig PATH]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/test/demo"
)

func main() {
	opts, err := parse(os.Args[1:])
	if err != nil {
		os.Exit(2)
	}
	// The narration is the output; the controllers' logs would drown it.
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := demo.Run(ctx, opts); err != nil {
		fmt.Fprintf(os.Stderr, "demo failed: %v\n", err)
		os.Exit(1)
	}
}

// parse reads the command line with a flag set of its own: the process-wide one carries
// controller-runtime's --kubeconfig, which means something else here.
func parse(args []string) (demo.Options, error) {
	fs := flag.NewFlagSet("etcd-adapter-demo", flag.ContinueOnError)
	keep := fs.Bool("keep-running", false, "keep the playground up after the scenario, until Ctrl-C")
	kubeconfig := fs.String("write-kubeconfig", "", "where to write the management cluster's kubeconfig (default $TMPDIR/etcd-adapter-demo/kubeconfig)")
	if err := fs.Parse(args); err != nil {
		return demo.Options{}, err
	}
	return demo.Options{KeepRunning: *keep, Kubeconfig: *kubeconfig}, nil
}
