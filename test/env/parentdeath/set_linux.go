package parentdeath

import (
	"os/exec"
	"syscall"
)

// Set makes cmd's process receive SIGKILL when this process ends. Go's exec requests the signal
// in the child before it execs and kills the child at once if this process already ended
// (forkAndExecInChild1 in syscall/exec_linux.go). Call it before cmd.Start.
func Set(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
