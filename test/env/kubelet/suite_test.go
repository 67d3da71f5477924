package kubelet_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// apiServer is the workload cluster apiserver every test in this package talks to.
var apiServer *env.APIServer

func TestMain(m *testing.M) {
	start := time.Now()
	s, err := env.StartAPIServer(env.APIServerOptions{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed to start kube-apiserver: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("kube-apiserver started in %v\n", time.Since(start).Round(time.Millisecond))
	apiServer = s
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "failed to stop kube-apiserver: %v\n", err)
		code = 1
	}
	os.Exit(code)
}
