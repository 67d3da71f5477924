package kubeadm

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// mgmt is the management cluster (Cluster API's ClusterCache included) and workload the shared
// workload apiserver every non-isolated test cluster registers.
var (
	mgmt     *env.Management
	workload *env.APIServer
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	start := time.Now()
	var err error
	if workload, err = env.StartAPIServer(env.APIServerOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "failed to start the workload apiserver: %v\n", err)
		return 1
	}
	defer stopOrReport("workload apiserver", workload.Stop)
	if mgmt, err = env.StartManagement(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "failed to start the management cluster: %v\n", err)
		return 1
	}
	defer stopOrReport("management cluster", mgmt.Stop)
	fmt.Printf("Test environment started in %s\n", time.Since(start).Round(time.Millisecond))
	return m.Run()
}

func stopOrReport(what string, stop func() error) {
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "failed to stop %s: %v\n", what, err)
	}
}
