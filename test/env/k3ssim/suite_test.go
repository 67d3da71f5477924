package k3ssim

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// The test etcd cluster is what the simulator drives in the suite.
var _ EtcdCluster = &etcdcluster.Cluster{}

// workload is the one real kube-apiserver every test of the package shares; tests keep apart
// by Node name prefixes.
var workload *env.APIServer

// defaultParallel is how many tests run at once unless -test.parallel is given. The tests
// mostly wait, on etcd rather than on the CPU: etcd refuses a member removal until the
// remaining peers have been connected for 5 s (its HealthInterval), so GOMAXPROCS (the
// default) would leave the machine idle.
const defaultParallel = 8

func TestMain(m *testing.M) {
	flag.Parse()
	env.DefaultTestParallel(defaultParallel)
	// The member controller's manager logs through the simulator's logger; silence the
	// controller-runtime global so it does not complain that it was never set.
	ctrl.SetLogger(logr.Discard())
	s, err := env.StartAPIServer(env.APIServerOptions{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed to start the workload kube-apiserver: %v\n", err)
		os.Exit(1)
	}
	workload = s
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "failed to stop the workload kube-apiserver: %v\n", err)
	}
	os.Exit(code)
}
