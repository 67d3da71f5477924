package operator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/docblock"
)

// TestOperatorInstallAndUpgrade installs etcd-adapter v0.1.0 as an AddonProvider with the Cluster
// API Operator's controller by running docs/install-with-operator.md's Install block (a ConfigMap
// of a release built by the project's release code, two clusterctl variables in
// spec.configSecret), then upgrades it to v0.2.0 by running the page's Upgrade block (that
// version's ConfigMap, spec.version and the selector's version patched). After each, the
// operator reports the version installed and the management cluster holds what `clusterctl init`
// (clusterctl's library) makes of the same release and variables: the CRD, the Deployment with
// the variables' values, both webhook configurations, RBAC, Services, cert-manager's Issuer and
// Certificates, all with clusterctl's labels. The upgrade keeps the CRD (so every ControlPlaneEtcd) and the variables' values.
func TestOperatorInstallAndUpgrade(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	releases := buildReleases(t, "v0.1.0", "v0.2.0")
	variables := map[string]string{
		"ETCD_ADAPTER_OBSERVATION_INTERVAL": "47s",
		"ETCD_ADAPTER_REPLICAS":             "3",
	}
	wantArg := "--observation-interval=47s"

	m := startManagement(ctx, t)
	startOperator(ctx, t, m)
	installCore(ctx, t, m)

	sh := docblock.NewShell(t, g, m.Config)
	runPageBlock(t, g, sh, releases["v0.1.0"], "v0.1.0")
	secret := &corev1.Secret{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: variablesSecret}, secret)).To(Succeed())
	applied := map[string]string{}
	for k, v := range secret.Data {
		applied[k] = string(v)
	}
	g.Expect(applied).To(Equal(variables), "the page's variables are the ones clusterctl renders with here")
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(operatorGroupVersion.WithKind("AddonProvider"))
	p.SetNamespace(addonNamespace)
	p.SetName(addon)
	waitInstalled(ctx, t, m.Client, p, "v0.1.0")

	d := deployment(ctx, g, m.Client)
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image("v0.1.0")))
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement(wantArg), "the variable in spec.configSecret was applied")
	g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)), "the variable in spec.configSecret was applied")
	expectSameAsClusterctl(ctx, g, m, clusterctlObjects(ctx, t, releases["v0.1.0"], "v0.1.0", variables))
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed())
	// The operator reads and writes clusterctl's inventory through its own provider objects
	// (internal/controller/client_proxy.go): clusterctl's inventory CRD is neither needed nor made.
	err := m.Client.Get(ctx, client.ObjectKey{Name: "providers.clusterctl.cluster.x-k8s.io"}, &apiextensionsv1.CustomResourceDefinition{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "clusterctl's inventory CRD: %v", err)

	runPageBlock(t, g, sh, releases["v0.2.0"], "v0.2.0")
	waitInstalled(ctx, t, m.Client, p, "v0.2.0")

	d = deployment(ctx, g, m.Client)
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image("v0.2.0")))
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement(wantArg), "the variable came through the upgrade")
	g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)), "the variable came through the upgrade")
	expectSameAsClusterctl(ctx, g, m, clusterctlObjects(ctx, t, releases["v0.2.0"], "v0.2.0", variables))
	after := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Name: crdName}, after)).To(Succeed())
	g.Expect(after.UID).To(Equal(crd.UID), "the upgrade kept the CRD, and with it every ControlPlaneEtcd")
}

// deployment returns the etcd-adapter Deployment.
func deployment(ctx context.Context, g Gomega, c client.Client) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: deploymentName}, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
	return d
}

// runPageBlock runs the block of docs/install-with-operator.md that builds version's release,
// as the page gives it, with kubectl against the management cluster. The block opens with
// `make release-manifests IMG=<image>`; the test checks that line is exactly that, with
// version's image, and runs the lines after it in a directory whose out/ is r. It does not run
// make: make would write the repository's out/, and its metadata.yaml would lack the release
// series v0.2 that buildReleases adds; r is built by the code make runs (hack/release-manifests).
func runPageBlock(t *testing.T, g Gomega, sh *docblock.Shell, r release, version string) {
	t.Helper()
	build := "make release-manifests IMG=" + image(version)
	block := docblock.ShellBlock(g, filepath.Join(repoRoot, "docs"), "install-with-operator.md", build)
	first, rest, _ := strings.Cut(block, "\n")
	g.Expect(first).To(Equal(build), "the block opens with the release build the test stands in for, not %q", first)
	dir := t.TempDir()
	g.Expect(os.Symlink(r.dir, filepath.Join(dir, "out"))).To(Succeed())
	sh.Run(g, fmt.Sprintf("cd %q", dir), rest)
}
