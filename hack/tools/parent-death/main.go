// Command parent-death starts the test environment's kube-apiserver or etcd so that it ends
// when the test process that started it ends, however that ends (a SIGKILL, a `go test
// -timeout` panic, a CI time limit). controller-runtime's envtest starts both binaries with
// exec.Cmd and only Setpgid (pkg/internal/testing/process), with no way to ask for a
// parent-death signal, so envtest starts this wrapper instead: it asks the kernel for SIGKILL
// on its parent's death and then execs the real binary in place, keeping its PID, arguments,
// environment and open files. The signal setting survives execve.
//
// hack/build-assets.sh installs one copy per binary in the assets directory's parent-death
// subdirectory (parent-death/kube-apiserver, parent-death/etcd); each copy runs the binary of
// its own name one directory up.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// ParentPIDEnvVar names the variable that holds the PID of the process that starts the wrapper.
// The wrapper compares it with its parent: a parent that died between the fork and the request
// for the signal would never send it.
const ParentPIDEnvVar = "ETCD_ADAPTER_PARENT_PID"

func main() {
	// Important! The parent-death signal is a setting of the calling thread, and execve keeps
	// only the thread that calls it: the request and the exec must run on the same thread.
	runtime.LockOSThread()
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "parent-death: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("failed to find this executable: %w", err)
	}
	target := filepath.Join(filepath.Dir(filepath.Dir(self)), filepath.Base(self))
	if err := endWithParent(); err != nil {
		return err
	}
	args := append([]string{target}, os.Args[1:]...)
	if err := syscall.Exec(target, args, os.Environ()); err != nil {
		return fmt.Errorf("failed to exec %s: %w", target, err)
	}
	return nil
}
