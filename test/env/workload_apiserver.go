package env

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/discovery"
)

// WorkloadKubeAPIServerEnvVar names a kube-apiserver binary that workload apiservers run
// instead of the test environment's (WorkloadAPIServerOptions); make test-compat sets it to
// each Kubernetes version of the compatibility matrix. The binary must have a parent-death
// wrapper beside it, in parent-death/kube-apiserver (hack/build-compat.sh installs one).
const WorkloadKubeAPIServerEnvVar = "ETCD_ADAPTER_WORKLOAD_KUBE_APISERVER"

// WorkloadKubernetesVersionEnvVar names the version (e.g. v1.31.14) the apiserver started from
// WorkloadKubeAPIServerEnvVar must report: StartAPIServer fails when it reports another, so the
// matrix cannot pass on another binary than the one it names.
const WorkloadKubernetesVersionEnvVar = "ETCD_ADAPTER_WORKLOAD_KUBERNETES_VERSION"

// WorkloadAPIServerOptions returns the options of a workload cluster's apiserver: the
// kube-apiserver of WorkloadKubeAPIServerEnvVar and WorkloadKubernetesVersionEnvVar when set,
// else the test environment's.
func WorkloadAPIServerOptions() APIServerOptions {
	return APIServerOptions{
		KubeAPIServer:     os.Getenv(WorkloadKubeAPIServerEnvVar),
		KubernetesVersion: os.Getenv(WorkloadKubernetesVersionEnvVar),
	}
}

// useKubeAPIServer makes the environment start path, through the parent-death wrapper beside
// it, instead of the assets directory's kube-apiserver.
func (s *APIServer) useKubeAPIServer(path string) error {
	wrapper := filepath.Join(filepath.Dir(path), wrapper(filepath.Base(path)))
	for _, p := range []string{path, wrapper} {
		if err := checkExecutable(p); err != nil {
			return fmt.Errorf("kube-apiserver %s cannot be started: %w", path, err)
		}
	}
	s.env.ControlPlane.APIServer.Path = wrapper
	return nil
}

// checkVersion fails unless the apiserver reports want as its gitVersion.
func (s *APIServer) checkVersion(want string) error {
	dc, err := discovery.NewDiscoveryClientForConfig(s.Config)
	if err != nil {
		return fmt.Errorf("failed to create a discovery client for kube-apiserver %s: %w", s.URL(), err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("failed to read the version of kube-apiserver %s: %w", s.URL(), err)
	}
	if v.GitVersion != want {
		return fmt.Errorf("kube-apiserver %s is %s, not %s", s.URL(), v.GitVersion, want)
	}
	return nil
}
