package clusterctl

import (
	"context"
	"errors"
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
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter/manager"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
	"github.com/etcd-adapter/etcd-adapter/test/env/inprocess"
	"github.com/etcd-adapter/etcd-adapter/test/env/releasetool"
)

const (
	// repoRoot holds config/, metadata.yaml and hack/release-manifests.
	repoRoot = "../.."
	// addon is the provider's name in clusterctl.yaml; clusterctl labels it addon-etcd-adapter.
	addon = "etcd-adapter"
	// addonLabel is the provider label clusterctl gives the addon (its ManifestLabel).
	addonLabel = "addon-etcd-adapter"
	// addonNamespace is where config/default puts the components.
	addonNamespace = "etcd-adapter-system"
	// coreNamespace is where clusterctl installs (and here records) the core provider.
	coreNamespace = "capi-system"
	// deploymentName, validatingName and mutatingName are the components' names after
	// config/default's namePrefix.
	deploymentName = "etcd-adapter-controller-manager"
	validatingName = "etcd-adapter-validating-webhook-configuration"
	mutatingName   = "etcd-adapter-mutating-webhook-configuration"
	crdName        = "controlplaneetcds.etcdadapter.cluster.x-k8s.io"
	// managerStopTimeout bounds the in-process manager's stop.
	managerStopTimeout = time.Minute
	// observationInterval is the tests' ControlPlaneEtcds' spec.observationInterval: short, so
	// the status follows the workload within seconds.
	observationInterval = 2 * time.Second
)

// image is the manager image the release of version names.
func image(version string) string { return "registry.example.com/etcd-adapter:" + version }

// scheme holds the management cluster's types and clusterctl's inventory.
func scheme() *runtime.Scheme {
	s := manager.Scheme()
	utilruntime.Must(clusterctlv1.AddToScheme(s))
	utilruntime.Must(admissionregistrationv1.AddToScheme(s))
	return s
}

// management is one management cluster of a test: the test environment's apiserver with Cluster
// API's CRDs and controllers, made known to clusterctl, with a kubeconfig file for clusterctl.
type management struct {
	*env.Management
	Kubeconfig clusterctlclient.Kubeconfig
	stop       func() error
}

// startManagement starts a management cluster and records Cluster API as installed the way
// clusterctl records it (see doc.go), with the cert-manager stand-in. It is stopped when t ends.
func startManagement(ctx context.Context, t *testing.T, r *repository) *management {
	t.Helper()
	return startManagementWith(ctx, t, r, managementOptions{})
}

// managementOptions shape a management cluster beyond startManagement's.
type managementOptions struct {
	// crdPaths are CRD manifests installed with Cluster API's; when set (cert-manager's own
	// CRDs) the cert-manager stand-in is not installed.
	crdPaths []string
	// apiServerFlags are kube-apiserver flags (env.APIServerOptions.Flags).
	apiServerFlags map[string]string
}

// startManagementWith is startManagement with o.
func startManagementWith(ctx context.Context, t *testing.T, r *repository, o managementOptions) *management {
	t.Helper()
	g := NewWithT(t)
	mgmt, err := env.StartManagementWith(ctx, env.ManagementOptions{
		Scheme: scheme(),
		// No webhook configuration is installed here (clusterctl installs the components'); this
		// only gives the apiserver a local webhook server address and a serving CA.
		Webhooks:          &envtest.WebhookInstallOptions{},
		CRDDirectoryPaths: o.crdPaths,
		APIServerFlags:    o.apiServerFlags,
	})
	g.Expect(err).NotTo(HaveOccurred())
	m := &management{Management: mgmt}
	t.Cleanup(func() {
		if m.stop != nil {
			g.Expect(m.stop()).To(Succeed())
		}
		stopManagement(t, g, mgmt)
	})
	m.Kubeconfig = clusterctlclient.Kubeconfig{Path: filepath.Join(t.TempDir(), "kubeconfig"), Context: "management"}
	g.Expect(writeKubeconfig(mgmt.Config, m.Kubeconfig.Path)).To(Succeed())
	g.Expect(m.recordCoreProvider(ctx, r)).To(Succeed())
	if len(o.crdPaths) == 0 {
		g.Expect(installCertManagerStandIn(ctx, mgmt.Client)).To(Succeed())
	}
	return m
}

// stopManagement stops a management cluster. Note: when the target's ClusterCache connects to
// the moved Cluster just as the test ends, its worker blocks for good sending the connect event to
// the Machine and MachineHealthCheck controllers, which have stopped reading: Cluster API v1.14.2
// sends on the GetClusterSource channel without watching the context
// (controllers/clustercache/cluster_cache.go, sendEventsToClusterSources). The manager then
// overruns its 30 s grace period. The apiserver and etcd are stopped either way, so that
// shutdown is logged, not failed; every other error of the stop fails the test.
func stopManagement(t *testing.T, g Gomega, mgmt *env.Management) {
	err := mgmt.Stop()
	if err != nil && errors.Is(err, context.DeadlineExceeded) && strings.Contains(err.Error(), "grace period") {
		t.Logf("Cluster API's controllers of the management cluster did not stop within their grace period: %v", err)
		return
	}
	g.Expect(err).NotTo(HaveOccurred())
}

// recordCoreProvider writes the core provider into clusterctl's inventory with clusterctl's
// own inventory client, and labels Cluster API's CRDs (and the test infrastructure's
// TestMachine CRD) as clusterctl labels what it installs, which move relies on to discover the
// types of a Cluster's objects.
func (m *management) recordCoreProvider(ctx context.Context, r *repository) error {
	cfg, err := config.New(ctx, r.configFile)
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", r.configFile, err)
	}
	inventory := cluster.New(cluster.Kubeconfig(m.Kubeconfig), cfg).ProviderInventory()
	if err := inventory.EnsureCustomResourceDefinitions(ctx); err != nil {
		return fmt.Errorf("failed to install clusterctl's inventory CRD: %w", err)
	}
	if err := m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: coreNamespace}}); err != nil {
		return fmt.Errorf("failed to create Namespace %s: %w", coreNamespace, err)
	}
	core := clusterctlv1.Provider{
		ObjectMeta:   metav1.ObjectMeta{Namespace: coreNamespace, Name: config.ClusterAPIProviderName},
		ProviderName: config.ClusterAPIProviderName,
		Type:         string(clusterctlv1.CoreProviderType),
		Version:      r.coreVersion,
	}
	if err := inventory.Create(ctx, core); err != nil {
		return fmt.Errorf("failed to record the core provider: %w", err)
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := m.Client.List(ctx, crds); err != nil {
		return fmt.Errorf("failed to list CRDs: %w", err)
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		var provider string
		switch crd.Spec.Group {
		case clusterv1.GroupVersion.Group:
			provider = core.ManifestLabel()
		case infra.Group:
			provider = "infrastructure-test"
		default:
			continue
		}
		before := crd.DeepCopy()
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels[clusterctlv1.ClusterctlLabel] = ""
		crd.Labels[clusterv1.ProviderNameLabel] = provider
		if err := m.Client.Patch(ctx, crd, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("failed to label CRD %s: %w", crd.Name, err)
		}
	}
	return nil
}

// installCertManagerStandIn installs cert-manager's Issuer and Certificate CRDs with an open
// schema: enough for clusterctl's cert-manager check (it creates a test Issuer and Certificate)
// and for the components' Issuer and Certificates to be stored. Nothing issues certificates.
func installCertManagerStandIn(ctx context.Context, c client.Client) error {
	var crds []client.Object
	for _, kind := range []string{"Issuer", "Certificate"} {
		plural := strings.ToLower(kind) + "s"
		crds = append(crds, &apiextensionsv1.CustomResourceDefinition{
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
		})
	}
	for _, crd := range crds {
		if err := c.Create(ctx, crd); err != nil {
			return fmt.Errorf("failed to create CRD %s: %w", crd.GetName(), err)
		}
	}
	return waitForCRDs(ctx, c, "issuers.cert-manager.io", "certificates.cert-manager.io")
}

func waitForCRDs(ctx context.Context, c client.Client, names ...string) error {
	for _, name := range names {
		err := poll(ctx, func() (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return false, err
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", name, err)
		}
	}
	return nil
}

// poll calls f every 100 ms until it returns true or an error, or ctx ends.
func poll(ctx context.Context, f func() (bool, error)) error {
	for {
		ok, err := f()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"management": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"admin": {ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}},
		Contexts:       map[string]*clientcmdapi.Context{"management": {Cluster: "management", AuthInfo: "admin"}},
		CurrentContext: "management",
	}
	if err := clientcmd.WriteToFile(kc, path); err != nil {
		return fmt.Errorf("failed to write the kubeconfig %s: %w", path, err)
	}
	return nil
}

// repository is a local clusterctl repository (repository_local.go's layout,
// {base}/{provider-label}/{version}/{components}) with the addon's releases and the core
// provider's, and the clusterctl.yaml that names them.
type repository struct {
	base        string
	configFile  string
	coreVersion string
	// variables are written into clusterctl.yaml, where clusterctl's processor reads them.
	variables map[string]string
}

// newRepository builds the addon's releases of versions (the first is the one clusterctl.yaml
// names, as `clusterctl init` installs it by default) with the project's release-manifests
// command, and lays out the core provider's. Every release's metadata.yaml is the project's,
// with a release series added for each of versions it lacks, as the project's metadata.yaml
// lists every series up to the release.
func newRepository(t *testing.T, versions ...string) *repository {
	t.Helper()
	g := NewWithT(t)
	home := t.TempDir()
	// clusterctl reads ~/.config/cluster-api (its overrides folder) and ~/.cluster-api; keep them
	// out of the test.
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	r := &repository{base: t.TempDir(), variables: map[string]string{}}
	r.configFile = filepath.Join(r.base, "clusterctl.yaml")

	projectMetadata, err := os.ReadFile(filepath.Join(repoRoot, "metadata.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	metadata := &clusterctlv1.Metadata{}
	g.Expect(yaml.Unmarshal(projectMetadata, metadata)).To(Succeed())
	for _, v := range versions {
		dir := filepath.Join(r.base, addonLabel, v)
		cmd := exec.Command(releaseManifests, "-root", repoRoot, "-out", dir, "-image", image(v)) //nolint:gosec // the test's own arguments
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "release-manifests for %s: %s", v, out)
		series := metadata.DeepCopy()
		g.Expect(releasetool.AddSeries(series, v)).To(Succeed())
		b, err := yaml.Marshal(series)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.WriteFile(filepath.Join(dir, "metadata.yaml"), b, 0o600)).To(Succeed())
		metadata = series
	}

	crdDir, err := capi.CoreCRDDir()
	g.Expect(err).NotTo(HaveOccurred())
	moduleDir := filepath.Join(crdDir, "..", "..", "..", "..")
	_, r.coreVersion, _ = strings.Cut(filepath.Base(moduleDir), "@")
	g.Expect(r.coreVersion).To(HavePrefix("v"), "Cluster API's version from its module directory %s", moduleDir)
	coreDir := filepath.Join(r.base, config.ClusterAPIProviderName, r.coreVersion)
	g.Expect(os.MkdirAll(coreDir, 0o755)).To(Succeed())
	coreMetadata, err := os.ReadFile(filepath.Join(moduleDir, "metadata.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(coreDir, "metadata.yaml"), coreMetadata, 0o600)).To(Succeed())
	var crds []string
	entries, err := os.ReadDir(crdDir)
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(crdDir, e.Name()))
		g.Expect(err).NotTo(HaveOccurred())
		crds = append(crds, string(b))
	}
	g.Expect(os.WriteFile(filepath.Join(coreDir, "core-components.yaml"), []byte(strings.Join(crds, "\n---\n")), 0o600)).To(Succeed())

	g.Expect(r.writeConfig(versions[0])).To(Succeed())
	return r
}

// writeConfig writes clusterctl.yaml: both providers (the addon's URL names version, the
// default clusterctl init installs) and the variables.
func (r *repository) writeConfig(version string) error {
	cfg := map[string]any{
		"providers": []map[string]string{
			{"name": addon, "type": string(clusterctlv1.AddonProviderType), "url": "file://" + filepath.Join(r.base, addonLabel, version, "addon-components.yaml")},
			{"name": config.ClusterAPIProviderName, "type": string(clusterctlv1.CoreProviderType), "url": "file://" + filepath.Join(r.base, config.ClusterAPIProviderName, r.coreVersion, "core-components.yaml")},
		},
	}
	for k, v := range r.variables {
		cfg[k] = v
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("failed to render clusterctl.yaml: %w", err)
	}
	if err := os.WriteFile(r.configFile, b, 0o600); err != nil {
		return fmt.Errorf("failed to write %s: %w", r.configFile, err)
	}
	return nil
}

// client returns a clusterctl client reading r's clusterctl.yaml.
func (r *repository) client(ctx context.Context, t *testing.T) clusterctlclient.Client {
	t.Helper()
	c, err := clusterctlclient.New(ctx, r.configFile)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return c
}

// install runs `clusterctl init --addon etcd-adapter:<version>` against m.
func (r *repository) install(ctx context.Context, t *testing.T, m *management, version string) {
	t.Helper()
	_, err := r.client(ctx, t).Init(ctx, clusterctlclient.InitOptions{
		Kubeconfig:     m.Kubeconfig,
		AddonProviders: []string{addon + ":" + version},
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// runManager points the webhook configurations clusterctl installed at the in-process manager's
// webhook server (what the webhook Service and cert-manager's CA injector do in a cluster) and
// starts the etcd-adapter manager against m, as the Deployment's Pods would run it. It returns
// once the webhooks answer; stopManager stops it.
func (m *management) runManager(ctx context.Context, t *testing.T, configure func(*manager.Options)) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(m.stop).To(BeNil(), "one etcd-adapter manager per management cluster")
	g.Expect(m.routeWebhooks(ctx)).To(Succeed())
	o := inprocess.ManagerOptions(m.Management)
	if configure != nil {
		configure(o)
	}
	m.stop = inprocess.StartManager(ctx, m.Config, o, managerStopTimeout)
	g.Expect(m.waitForWebhooks(ctx)).To(Succeed())
}

// stopManager stops the in-process manager, as deleting the Deployment stops its Pods.
func (m *management) stopManager(t *testing.T) {
	t.Helper()
	stop := m.stop
	m.stop = nil
	NewWithT(t).Expect(stop()).To(Succeed())
}

func (m *management) routeWebhooks(ctx context.Context) error {
	wio := m.WebhookInstallOptions()
	base := fmt.Sprintf("https://%s:%d", wio.LocalServingHost, wio.LocalServingPort)
	route := func(cc *admissionregistrationv1.WebhookClientConfig) error {
		if cc.Service == nil || cc.Service.Path == nil {
			return errors.New("the webhook names no Service path")
		}
		cc.URL = new(base + *cc.Service.Path)
		cc.Service = nil
		cc.CABundle = wio.LocalServingCAData
		return nil
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := m.Client.Get(ctx, client.ObjectKey{Name: validatingName}, v); err != nil {
		return fmt.Errorf("failed to get %s: %w", validatingName, err)
	}
	for i := range v.Webhooks {
		if err := route(&v.Webhooks[i].ClientConfig); err != nil {
			return fmt.Errorf("webhook %s: %w", v.Webhooks[i].Name, err)
		}
	}
	if err := m.Client.Update(ctx, v); err != nil {
		return fmt.Errorf("failed to update %s: %w", validatingName, err)
	}
	mu := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := m.Client.Get(ctx, client.ObjectKey{Name: mutatingName}, mu); err != nil {
		return fmt.Errorf("failed to get %s: %w", mutatingName, err)
	}
	for i := range mu.Webhooks {
		if err := route(&mu.Webhooks[i].ClientConfig); err != nil {
			return fmt.Errorf("webhook %s: %w", mu.Webhooks[i].Name, err)
		}
	}
	if err := m.Client.Update(ctx, mu); err != nil {
		return fmt.Errorf("failed to update %s: %w", mutatingName, err)
	}
	return nil
}

// waitForWebhooks waits until the manager answers the quorum guard: a dry-run delete of a
// Machine that does not exist reaches no webhook, so the probe is the webhook server's TLS
// port itself.
func (m *management) waitForWebhooks(ctx context.Context) error {
	wio := m.WebhookInstallOptions()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return poll(ctx, func() (bool, error) {
		return dialable(fmt.Sprintf("%s:%d", wio.LocalServingHost, wio.LocalServingPort)), nil
	})
}

// dialable reports whether a TCP connection to addr opens.
func dialable(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}
