package k3sprovider_test

import (
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"sigs.k8s.io/cluster-api/controllers/clustercache"

	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

// This module stands where cluster-api-k3s stands: importing etcd-adapter's decisions and K3s
// backend must not lift it to newer Cluster API or controller-runtime versions (Go's minimal
// version selection would, if either module required them). The build list is go's own answer.
func TestPinnedVersions(t *testing.T) {
	g := NewWithT(t)
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}}={{.Version}}",
		"sigs.k8s.io/cluster-api", "sigs.k8s.io/controller-runtime", "k8s.io/client-go").Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Fields(string(out))).To(Equal([]string{
		"sigs.k8s.io/cluster-api=v1.10.1",
		"sigs.k8s.io/controller-runtime=v0.20.4",
		"k8s.io/client-go=v0.32.3",
	}))
}

// The K3s backend's Node watcher plugs into the ClusterCache of this Cluster API version too.
var _ clustercache.Watcher = (*k3s.NodeWatcher)(nil)
