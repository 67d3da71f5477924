package parentdeath

import (
	"fmt"
	"os"
	"strconv"
)

// ParentPIDEnvVar names the variable from which the parent-death wrapper learns the PID of the
// process that starts it. Keep it in step with hack/tools/parent-death.
const ParentPIDEnvVar = "ETCD_ADAPTER_PARENT_PID"

// Export sets ParentPIDEnvVar to this process's PID, for the parent-death wrappers that envtest
// starts from here (envtest passes this process's environment on). It is set on every call,
// not once, so that a test binary started by another one (which inherited its parent's value)
// names itself.
func Export() error {
	if err := os.Setenv(ParentPIDEnvVar, strconv.Itoa(os.Getpid())); err != nil {
		return fmt.Errorf("failed to set %s: %w", ParentPIDEnvVar, err)
	}
	return nil
}
