package env

import (
	"fmt"
	"os"
	"testing"
)

// TestMain stops the environment the tests share (see sharedPair) after all tests ran.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := stopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "failed to stop the shared test environment: %v\n", err)
		code = 1
	}
	os.Exit(code)
}
