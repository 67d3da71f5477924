//go:build !linux

package parentdeath

import "os/exec"

// Set does nothing: only Linux has a parent-death signal. Elsewhere cmd's process can outlive a
// test process that was killed.
func Set(*exec.Cmd) {}
