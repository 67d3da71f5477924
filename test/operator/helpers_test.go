package operator

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/docblock"
	"github.com/etcd-adapter/etcd-adapter/test/env/parentdeath"
	"github.com/etcd-adapter/etcd-adapter/test/env/releasetool"
)

const (
	// addon is the AddonProvider's name, which the operator passes to clusterctl as the
	// provider's name; clusterctl labels the components addon-etcd-adapter.
	addon      = "etcd-adapter"
	addonLabel = "addon-etcd-adapter"
	// addonNamespace is where config/default puts the components; the operator installs a
	// provider into its own namespace, so the AddonProvider lives there.
	addonNamespace = "etcd-adapter-system"
	coreNamespace  = "capi-system"
	coreName       = "cluster-api"
	// deploymentName is the components' Deployment after config/default's namePrefix.
	deploymentName     = "etcd-adapter-controller-manager"
	crdName            = "controlplaneetcds.etcdadapter.cluster.x-k8s.io"
	coreDeploymentName = "capi-controller-manager"
	// sourceLabel is the label the providers' spec.fetchConfig.selector matches; its value is
	// the provider's name.
	sourceLabel = "provider-components"
	// versionLabel is the operator's label for the version a ConfigMap holds
	// (api/v1alpha2/provider_types.go, ConfigMapVersionLabelName). The selector matches it too:
	// the operator fails a provider whose selector matches more than one ConfigMap
	// (internal/controller/genericprovider_controller.go, processProviderConfigMaps), so an
	// upgrade changes the selector's version with spec.version.
	versionLabel = "provider.cluster.x-k8s.io/version"
	// variablesSecret is the Secret spec.configSecret names: clusterctl variables, one a key.
	variablesSecret = "etcd-adapter-variables"
	// installTimeout bounds one install or upgrade by the operator on a loaded machine.
	installTimeout = 3 * time.Minute
)

// operatorGroupVersion is the operator's API; the test reads and writes it unstructured, so
// the main module does not depend on the operator's module.
var operatorGroupVersion = schema.GroupVersion{Group: "operator.cluster.x-k8s.io", Version: "v1alpha2"}

// image is the manager image the release of version names.
func image(version string) string { return "registry.example.com/etcd-adapter:" + version }

// release is one etcd-adapter release as `make release-manifests` builds it.
type release struct {
	dir                  string
	components, metadata []byte
}

// buildReleases builds the addon's releases of versions with the project's release-manifests
// command. Every release's metadata.yaml is the project's with a release series added for each
// of versions it lacks, as the project's metadata.yaml lists every series up to the release.
func buildReleases(t *testing.T, versions ...string) map[string]release {
	t.Helper()
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(repoRoot, "metadata.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	metadata := &clusterctlv1.Metadata{}
	g.Expect(yaml.Unmarshal(raw, metadata)).To(Succeed())
	base := t.TempDir()
	releases := map[string]release{}
	for _, v := range versions {
		dir := filepath.Join(base, addonLabel, v)
		out, err := exec.Command(releaseManifests, "-root", repoRoot, "-out", dir, "-image", image(v)).CombinedOutput() //nolint:gosec // the test's own arguments
		g.Expect(err).NotTo(HaveOccurred(), "release-manifests for %s: %s", v, out)
		g.Expect(releasetool.AddSeries(metadata, v)).To(Succeed())
		m, err := yaml.Marshal(metadata)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.WriteFile(filepath.Join(dir, "metadata.yaml"), m, 0o600)).To(Succeed())
		components, err := os.ReadFile(filepath.Join(dir, "addon-components.yaml"))
		g.Expect(err).NotTo(HaveOccurred())
		releases[v] = release{dir: dir, components: components, metadata: m}
	}
	return releases
}

func scheme() *runtime.Scheme {
	s := env.Scheme()
	utilruntime.Must(admissionregistrationv1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}

// startManagement starts a management cluster with the operator's CRDs and its webhook
// configurations (envtest points them at its local serving address, where the operator process
// listens), and the cert-manager stand-in. It is stopped when t ends.
func startManagement(ctx context.Context, t *testing.T) *env.Management {
	t.Helper()
	g := NewWithT(t)
	m, err := env.StartManagementWith(ctx, env.ManagementOptions{
		Scheme:            scheme(),
		CRDDirectoryPaths: []string{filepath.Join(operatorDir, "crd")},
		Webhooks:          &envtest.WebhookInstallOptions{Paths: []string{filepath.Join(operatorDir, "webhook")}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(m.Stop()).To(Succeed()) })
	g.Expect(installCertManagerStandIn(ctx, m.Client)).To(Succeed())
	return m
}

// startOperator runs the operator's manager as its own process against m, as its Deployment
// runs it (one replica, so no leader election), serving its webhooks on the address and with
// the certificate the apiserver's webhook configurations name. It returns once the webhook
// server accepts connections; the process is killed when t ends, and its log printed when t
// failed.
func startOperator(ctx context.Context, t *testing.T, m *env.Management) {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	g.Expect(docblock.WriteKubeconfig(m.Config, kubeconfig)).To(Succeed())
	wio := m.WebhookInstallOptions()
	logPath := filepath.Join(dir, "operator.log")
	logFile, err := os.Create(logPath)
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(filepath.Join(operatorDir, "manager"), //nolint:gosec // the built operator
		"--kubeconfig="+kubeconfig,
		fmt.Sprintf("--webhook-port=%d", wio.LocalServingPort),
		"--webhook-cert-dir="+wio.LocalServingCertDir,
		"--health-addr=127.0.0.1:0",
		"--diagnostics-address=0",
		"--profiler-address=",
		"--v=2",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	parentdeath.Set(cmd)
	g.Expect(cmd.Start()).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		// Waiting makes sure the process is gone before its log is read; its exit (killed, or
		// an earlier exit of its own) is shown with the log.
		exit := <-done
		_ = logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("operator exited (%v); log:\n%s", exit, b)
			}
		}
	})
	addr := net.JoinHostPort(wio.LocalServingHost, fmt.Sprint(wio.LocalServingPort))
	g.Eventually(func() error {
		select {
		case err := <-done:
			done <- err
			return StopTrying(fmt.Sprintf("the operator exited: %v", err))
		default:
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	}, 2*time.Minute, 200*time.Millisecond).Should(Succeed(), "the operator's webhook server at %s", addr)
}

// sourceConfigMap is one version of a provider's components in the operator's ConfigMap
// format: named and labelled by the version, labelled for the provider's fetchConfig.selector,
// the components in `components` and metadata.yaml in `metadata`. Components over the 1 MiB a
// ConfigMap holds are gzipped into binaryData, with the annotation that says so.
func sourceConfigMap(namespace, provider, version string, components, metadata []byte) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: version, Labels: map[string]string{sourceLabel: provider, versionLabel: version}},
		Data:       map[string]string{"metadata": string(metadata)},
	}
	if len(components)+len(metadata) < 1<<20 {
		cm.Data["components"] = string(components)
		return cm, nil
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(components); err != nil {
		return nil, fmt.Errorf("failed to compress the components of %s %s: %w", provider, version, err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("failed to compress the components of %s %s: %w", provider, version, err)
	}
	cm.BinaryData = map[string][]byte{"components": buf.Bytes()}
	cm.Annotations = map[string]string{"provider.cluster.x-k8s.io/compressed": "true"}
	return cm, nil
}

// newProvider is an operator provider object of kind, installing version from the ConfigMap
// labelled for name and version in its namespace.
func newProvider(kind, namespace, name, version string) *unstructured.Unstructured {
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(operatorGroupVersion.WithKind(kind))
	p.SetNamespace(namespace)
	p.SetName(name)
	spec := map[string]any{
		"version":     version,
		"fetchConfig": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{sourceLabel: name, versionLabel: version}}},
	}
	p.Object["spec"] = spec
	return p
}

// waitInstalled waits until the operator reports p installed at version: the ProviderInstalled
// condition True and status.installedVersion. On a timeout the failure names the conditions.
func waitInstalled(ctx context.Context, t *testing.T, c client.Client, p *unstructured.Unstructured, version string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		conditions, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
		installed, _, _ := unstructured.NestedString(p.Object, "status", "installedVersion")
		g.Expect(installed).To(Equal(version), "status.installedVersion; conditions %v", conditions)
		g.Expect(condition(p, "ProviderInstalled")).To(HaveKeyWithValue("status", "True"), "conditions %v", conditions)
	}, installTimeout, 200*time.Millisecond).Should(Succeed(), "%s %s/%s installed at %s", p.GetKind(), p.GetNamespace(), p.GetName(), version)
}

// condition returns p's status condition of type, or nil.
func condition(p *unstructured.Unstructured, conditionType string) map[string]any {
	conditions, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == conditionType {
			return m
		}
	}
	return nil
}

// installCertManagerStandIn installs cert-manager's Issuer and Certificate CRDs with an open
// schema, so the components' Issuer and Certificates are stored. Nothing issues certificates.
func installCertManagerStandIn(ctx context.Context, c client.Client) error {
	var names []string
	for _, kind := range []string{"Issuer", "Certificate"} {
		plural := strings.ToLower(kind) + "s"
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".cert-manager.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "cert-manager.io",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: new(true),
					}},
				}},
			},
		}
		if err := c.Create(ctx, crd); err != nil {
			return fmt.Errorf("failed to create CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return false, err
			}
			return established(crd), nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", name, err)
		}
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
