package kcp

import (
	"flag"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// logControllers routes the controllers' logs (KCP, CABPK, Cluster API core) to stderr.
var logControllers = flag.Bool("kcp.log", false, "print the in-process controllers' logs")

// TestMain discards the controllers' logs unless -kcp.log is given.
func TestMain(m *testing.M) {
	flag.Parse()
	if *logControllers {
		ctrl.SetLogger(klog.Background())
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	os.Exit(m.Run())
}
