package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdadm"
)

var (
	suiteStart time.Time
	mgmt       *env.Management
	adapter    *adapterManager
	scheme     *runtime.Scheme
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "etcd-adapter end-to-end")
}

var _ = BeforeSuite(func() {
	suiteStart = time.Now()
	scheme = env.Scheme()
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	// Note: KubeadmControlPlane's CRD is installed (no KCP controller runs): the creation
	// controller reads a KubeadmControlPlane Cluster's etcd (stacked or external) from it. So is
	// the EtcdadmCluster stand-in (test/env/etcdadm), with no etcdadm controller.
	kubeadmCRDs, err := capi.KubeadmCRDs()
	Expect(err).NotTo(HaveOccurred())
	mgmt, err = env.StartManagementWith(context.Background(), env.ManagementOptions{
		Scheme:            scheme,
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")},
		CRDs:              append(kubeadmCRDs, etcdadm.ClusterCRD()),
		Webhooks:          &envtest.WebhookInstallOptions{Paths: []string{filepath.Join("..", "..", "config", "webhook")}},
	})
	Expect(err).NotTo(HaveOccurred())
	setUpAdapterIdentity(context.Background())
	adapter, err = startAdapter(context.Background(), mgmt, nil)
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("Management cluster and etcd-adapter started in %s\n", time.Since(suiteStart).Round(time.Millisecond))
})

// Note: registered before every other node of a spec, this cleanup runs after all of them,
// including the specs' own DeferCleanup calls.
var _ = BeforeEach(func() {
	DeferCleanup(func() {
		Expect(restoreAdapter()).To(Succeed(), "etcd-adapter must be running again for the next spec")
	})
})

var _ = AfterSuite(func() {
	defer func() {
		if mgmt != nil {
			Expect(mgmt.Stop()).To(Succeed())
		}
		fmt.Printf("etcd-adapter end-to-end suite took %s\n", time.Since(suiteStart).Round(time.Second))
	}()
	if adapter != nil {
		Expect(adapter.Stop()).To(Succeed())
	}
	checkAdapterRBAC()
})
