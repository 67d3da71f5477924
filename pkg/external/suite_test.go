package external

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// mgmt is the management apiserver that holds the clusters' Secrets.
var mgmt *env.APIServer

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	start := time.Now()
	var err error
	if mgmt, err = env.StartAPIServer(env.APIServerOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "failed to start the management apiserver: %v\n", err)
		return 1
	}
	defer func() {
		if err := mgmt.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "failed to stop the management apiserver: %v\n", err)
		}
	}()
	fmt.Printf("Test environment started in %s\n", time.Since(start).Round(time.Millisecond))
	return m.Run()
}
