package operator

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestOperatorInstallAndUpgrade installs etcd-adapter v0.1.0 as an AddonProvider with the Cluster
// API Operator's controller, from a ConfigMap built by the project's release code and two
// clusterctl variables in spec.configSecret, then upgrades it to v0.2.0 by adding that version's
// ConfigMap and changing spec.version and the version its selector matches. After each, the operator reports the version installed and
// the management cluster holds what `clusterctl init` (clusterctl's library) makes of the same
// release and variables: the CRD, the Deployment with the variables' values, both webhook
// configurations, RBAC, Services, cert-manager's Issuer and Certificates, all with clusterctl's
// labels. The upgrade keeps the CRD (so every ControlPlaneEtcd) and the variables' values.
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

	g.Expect(m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: addonNamespace}})).To(Succeed())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: addonNamespace, Name: variablesSecret}, StringData: variables}
	g.Expect(m.Client.Create(ctx, secret)).To(Succeed())
	source, err := sourceConfigMap(addonNamespace, addon, "v0.1.0", releases["v0.1.0"].components, releases["v0.1.0"].metadata)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Client.Create(ctx, source)).To(Succeed())
	p := newProvider("AddonProvider", addonNamespace, addon, "v0.1.0", variablesSecret)
	g.Expect(m.Client.Create(ctx, p)).To(Succeed())
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
	err = m.Client.Get(ctx, client.ObjectKey{Name: "providers.clusterctl.cluster.x-k8s.io"}, &apiextensionsv1.CustomResourceDefinition{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "clusterctl's inventory CRD: %v", err)

	source, err = sourceConfigMap(addonNamespace, addon, "v0.2.0", releases["v0.2.0"].components, releases["v0.2.0"].metadata)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Client.Create(ctx, source)).To(Succeed())
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
	g.Expect(unstructured.SetNestedField(p.Object, "v0.2.0", "spec", "version")).To(Succeed())
	g.Expect(unstructured.SetNestedField(p.Object, "v0.2.0", "spec", "fetchConfig", "selector", "matchLabels", versionLabel)).To(Succeed())
	g.Expect(m.Client.Update(ctx, p)).To(Succeed())
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
