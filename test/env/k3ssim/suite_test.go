package k3ssim

import (
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

func TestMain(m *testing.M) {
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
