//go:build !linux

package main

// endWithParent does nothing: only Linux has a parent-death signal (prctl PR_SET_PDEATHSIG).
// Elsewhere the test environment's processes can outlive a test process that was killed.
func endWithParent() error { return nil }
