package main

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-adapter/etcd-adapter/controlplane/webhooks/machinehook"
	"github.com/etcd-adapter/etcd-adapter/controlplane/webhooks/quorumguard"
	"github.com/etcd-adapter/etcd-adapter/test/env"
)

const providerLabel = "cluster.x-k8s.io/provider"

// TestComponents builds the components YAML and checks that the objects fit together: every one
// carries the provider label, the CRDs carry the contract label, and the Deployment, Service,
// webhook configuration, Certificate and Issuer name each other correctly.
func TestComponents(t *testing.T) {
	g := NewWithT(t)
	objs := components(g)

	byKind := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		g.Expect(o.GetLabels()).To(HaveKeyWithValue(providerLabel, "addon-etcd-adapter"), "%s %s", o.GetKind(), o.GetName())
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
	}
	for _, kind := range []string{"CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
		"Role", "RoleBinding", "Deployment", "Service", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
		"Certificate", "Issuer", "PodDisruptionBudget"} {
		g.Expect(byKind).To(HaveKey(kind))
	}
	for _, crd := range byKind["CustomResourceDefinition"] {
		g.Expect(crd.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta2", "v1alpha1"), crd.GetName())
	}
	ns := byKind["Namespace"][0].GetName()
	g.Expect(ns).To(Equal("etcd-adapter-system"))

	deploy := byKind["Deployment"][0]
	sa, _, _ := unstructured.NestedString(deploy.Object, "spec", "template", "spec", "serviceAccountName")
	g.Expect(sa).To(Equal(byKind["ServiceAccount"][0].GetName()))
	volumes, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "volumes")
	g.Expect(volumes).To(HaveLen(3), "the webhook's and the metrics endpoint's serving certificates, and the snapshot scratch space")
	certSecret, _, _ := unstructured.NestedString(volumes[0].(map[string]any), "secret", "secretName")

	var cert *unstructured.Unstructured
	for _, c := range byKind["Certificate"] {
		if name, _, _ := unstructured.NestedString(c.Object, "spec", "secretName"); name == certSecret {
			cert = c
		}
	}
	g.Expect(cert).NotTo(BeNil(), "the webhook's certificate Secret %s must come from a Certificate", certSecret)
	ca := checkCertificateChain(g, byKind["Issuer"], byKind["Certificate"])

	var svc *unstructured.Unstructured
	for _, o := range byKind["Service"] {
		if o.GetName() == "etcd-adapter-webhook-service" {
			svc = o
		}
	}
	g.Expect(svc).NotTo(BeNil())
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	g.Expect(dnsNames).To(ContainElement(svc.GetName() + "." + ns + ".svc"))

	for kind, path := range map[string]string{"ValidatingWebhookConfiguration": quorumguard.Path, "MutatingWebhookConfiguration": machinehook.Path} {
		wc := byKind[kind][0]
		g.Expect(wc.GetAnnotations()).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", ns+"/"+ca.GetName()),
			"%s: the caBundle is the CA's, so a renewed serving certificate does not change it", kind)
		hooks, _, _ := unstructured.NestedSlice(wc.Object, "webhooks")
		g.Expect(hooks).NotTo(BeEmpty(), kind)
		for _, h := range hooks {
			ref, _, _ := unstructured.NestedStringMap(h.(map[string]any), "clientConfig", "service")
			g.Expect(ref).To(Equal(map[string]string{"name": svc.GetName(), "namespace": ns, "path": path}), kind)
		}
	}
}

// TestComponentsApply installs the generated CRDs (and stand-ins for cert-manager's) on a real
// API server and creates every other object of the components YAML with server-side dry-run, so
// a manifest the API server would reject fails `make test`.
func TestComponentsApply(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, err := env.StartAPIServer(env.APIServerOptions{CRDDirectoryPaths: []string{filepath.Join("testdata", "cert-manager-crds.yaml")}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(s.Stop()).To(Succeed()) })

	objs := components(g)
	var crds []*apiextensionsv1.CustomResourceDefinition
	var rest []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "CustomResourceDefinition":
			g.Expect(s.Client.Create(ctx, o.DeepCopy(), client.DryRunAll)).To(Succeed(), o.GetName())
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd)).To(Succeed())
			crds = append(crds, crd)
		case "Namespace":
			g.Expect(s.Client.Create(ctx, o.DeepCopy())).To(Succeed(), o.GetName())
		default:
			rest = append(rest, o)
		}
	}
	_, err = envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{CRDs: crds})
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range rest {
		g.Expect(s.Client.Create(ctx, o, client.DryRunAll)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}
}

// components returns the objects of the components YAML as `clusterctl init` installs them with
// no variable set: every clusterctl variable at its default.
func components(g Gomega) []*unstructured.Unstructured {
	return render(g, nil)
}

// TestHighAvailability checks that the manager runs two replicas, that a PodDisruptionBudget
// keeps one of its Pods up, and that its memory limit covers the fleet docs/operations.md
// ("Sizing") says one manager serves.
func TestHighAvailability(t *testing.T) {
	g := NewWithT(t)
	var deploy, pdb *unstructured.Unstructured
	for _, o := range components(g) {
		switch o.GetKind() {
		case "Deployment":
			deploy = o
		case "PodDisruptionBudget":
			pdb = o
		}
	}
	g.Expect(deploy).NotTo(BeNil())
	g.Expect(pdb).NotTo(BeNil())

	replicas, _, _ := unstructured.NestedFieldNoCopy(deploy.Object, "spec", "replicas")
	g.Expect(replicas).To(BeNumerically(">=", 2))
	minAvailable, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "minAvailable")
	g.Expect(minAvailable).To(BeNumerically("==", 1))
	g.Expect(pdb.GetNamespace()).To(Equal(deploy.GetNamespace()))
	pdbSelector, _, _ := unstructured.NestedStringMap(pdb.Object, "spec", "selector", "matchLabels")
	podLabels, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "metadata", "labels")
	g.Expect(pdbSelector).NotTo(BeEmpty())
	for k, v := range pdbSelector {
		g.Expect(podLabels).To(HaveKeyWithValue(k, v))
	}

	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	limit, _, _ := unstructured.NestedString(containers[0].(map[string]any), "resources", "limits", "memory")
	request, _, _ := unstructured.NestedString(containers[0].(map[string]any), "resources", "requests", "memory")
	// Note: the sizing docs/operations.md gives, measured by `make bench-fleet` (resident memory
	// without a memory limit, a base plus a slope per Cluster; K3s measured at 1,000 Clusters,
	// kubeadm at 100 and 500): the limit must hold 1,000 Clusters of either, the request 100.
	mib := func(base, perCluster float64, clusters int) int64 {
		return int64((base + perCluster*float64(clusters)) * (1 << 20))
	}
	const k3sBase, k3sPerCluster, kubeadmBase, kubeadmPerCluster = 54.1, 1.27, 54.1, 1.78
	limitQ, requestQ := resource.MustParse(limit), resource.MustParse(request)
	g.Expect(limitQ.Value()).To(BeNumerically(">=", mib(k3sBase, k3sPerCluster, 1000)), "memory limit %s", limit)
	g.Expect(limitQ.Value()).To(BeNumerically(">=", mib(kubeadmBase, kubeadmPerCluster, 1000)), "memory limit %s", limit)
	g.Expect(requestQ.Value()).To(BeNumerically(">=", mib(k3sBase, k3sPerCluster, 100)), "memory request %s", request)
	g.Expect(requestQ.Value()).To(BeNumerically(">=", mib(kubeadmBase, kubeadmPerCluster, 100)), "memory request %s", request)
}
