package k3sprovider_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The test environment is a real kube-apiserver and etcd (KUBEBUILDER_ASSETS, which `make test`
// sets to the binaries it builds) with Cluster API v1.10.1's own CRDs, started by
// controller-runtime v0.20.4's envtest: the versions this consumer is pinned to. It serves as
// both the management cluster (Machines) and the workload cluster (the K3s Nodes).
var (
	k8sClient client.Client
	scheme    = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test-modules` (it builds the test kube-apiserver and etcd)")
		return 1
	}
	crds, err := capiCRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme} {
		if err := add(scheme); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{crds}, ErrorIfCRDPathMissing: true, Scheme: scheme}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "failed to start the test environment:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	if k8sClient, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// capiCRDs is Cluster API v1.10.1's CRD directory in the module cache (the version go.mod pins).
func capiCRDs() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		return "", fmt.Errorf("failed to find Cluster API's module: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases"), nil
}
