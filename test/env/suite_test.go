package env

import (
	"fmt"
	"os"
	"testing"
)

// TestMain stops the environment the tests share (see sharedPair) after all tests ran. Started
// as the helper of TestKilledTestBinary_leavesNoServers it runs no tests.
func TestMain(m *testing.M) {
	if os.Getenv(killHelperEnvVar) != "" {
		os.Exit(runKillHelper())
	}
	code := m.Run()
	if err := stopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "failed to stop the shared test environment: %v\n", err)
		code = 1
	}
	os.Exit(code)
}
