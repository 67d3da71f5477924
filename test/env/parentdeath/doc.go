// Package parentdeath makes the processes the test environment starts end with the test process
// that started them, on Linux by a parent-death signal (prctl PR_SET_PDEATHSIG, SIGKILL): a test
// binary that is killed, panics on `go test -timeout` or is stopped by a CI time limit leaves no
// kube-apiserver, etcd or manager process behind.
//
// Processes this repository starts itself get the signal from Go's exec (Set). kube-apiserver
// and etcd are started by controller-runtime's envtest, which offers no hook for it, so test/env
// starts them through the parent-death wrappers hack/build-assets.sh installs
// (hack/tools/parent-death), which read the starting process's PID from ParentPIDEnvVar
// (Export).
//
// Important! Linux sends the signal when the thread that forked the process ends, not the
// process (prctl(2); golang/go#27505). The Go runtime ends a thread only when a goroutine that
// locked it (runtime.LockOSThread) returns without unlocking; the goroutines that start these
// processes do not lock their thread, so it lives as long as the test process.
package parentdeath
