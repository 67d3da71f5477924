package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
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
	// Note: printed after Ginkgo's summary, which names a failed spec but not why it failed: a
	// CI log that keeps only the tail of this long run then still says why.
	for _, f := range failures {
		fmt.Println(f)
	}
}

// failures describes each failed spec, for TestE2E to print last.
var failures []string

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() {
		failures = append(failures, describeFailure(r))
	}
})

// describeFailure is a failed spec's last step, failure and last lines of GinkgoWriter output.
func describeFailure(r SpecReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "FAILED %q at %s\n", r.LeafNodeText, r.Failure.Location)
	for i := len(r.SpecEvents) - 1; i >= 0; i-- {
		if e := r.SpecEvents[i]; e.SpecEventType == types.SpecEventByStart {
			fmt.Fprintf(&b, "  last step: %s\n", e.Message)
			break
		}
	}
	fmt.Fprintf(&b, "  %s: %s\n", r.State, etcd.Truncate(r.Failure.Message, 3000))
	if out := strings.Split(strings.TrimSpace(r.CapturedGinkgoWriterOutput), "\n"); len(out) > 0 && out[0] != "" {
		fmt.Fprintf(&b, "  last output:\n    %s\n", strings.Join(out[max(0, len(out)-8):], "\n    "))
	}
	return b.String()
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
