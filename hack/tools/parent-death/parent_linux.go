package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// endWithParent asks the kernel to SIGKILL this process when its parent ends, and fails if the
// parent (the PID in ParentPIDEnvVar) already ended: the process then has another parent, and
// the signal would never come.
func endWithParent() error {
	want, err := strconv.Atoi(os.Getenv(ParentPIDEnvVar))
	if err != nil {
		return fmt.Errorf("%s must hold the PID of the process that starts this wrapper: %w", ParentPIDEnvVar, err)
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		return fmt.Errorf("failed to set the parent-death signal: %w", errno)
	}
	if got := os.Getppid(); got != want {
		return fmt.Errorf("the process that started this wrapper (PID %d) has ended (parent now %d)", want, got)
	}
	return nil
}
