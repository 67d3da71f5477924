package clusterctl

import (
	"context"
	"crypto/sha1" //nolint:gosec // openssl x509 -fingerprint prints SHA-1 by default; this compares with it
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/docblock"
	"github.com/etcd-adapter/etcd-adapter/test/env/managerproc"
	"github.com/etcd-adapter/etcd-adapter/test/env/releasetool"
)

// quickStartImage is the quick start's IMG.
const quickStartImage = "registry.example.com/etcd-adapter:v0.1.0"

// TestDocsInstallUpgradeUninstall runs, as the pages give them, with bash, kubectl v1.36.3 and the
// real clusterctl v1.14.2 binary, the blocks an operator runs over an install's life:
// docs/quick-start.md's install block (the one ending in `clusterctl init --config
// $REPO/clusterctl.yaml --addon etcd-adapter`), runbooks.md's cert-manager diagnostics, the quick
// start's check block, operations.md's upgrade block and its uninstall block step by step. The
// management apiserver has cert-manager present first (its CRDs and its controller, a process, as
// TestInstallWithCertManager has them): clusterctl init finds it and installs no cert-manager of
// its own (it would download cert-manager's release from GitHub). The Deployment's two replicas
// run as manager processes with the rendered Deployment's arguments. Each block is judged by what
// it did: the inventory, the CRD, the Deployment, the webhooks' caBundle that cainjector fills,
// the ControlPlaneEtcd the manager creates, the hook and the EtcdAdapterMemberHealthy condition it
// takes off, what clusterctl delete removes.
func TestDocsInstallUpgradeUninstall(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	q := startQuickStart(ctx, t)
	m := q.m

	q.sh.Run(g, q.prelude, docblock.ShellBlock(g, docsDir, "quick-start.md", "clusterctl init"))

	g.Expect(inventory(ctx, g, m)).To(ConsistOf(And(
		HaveField("ProviderName", addon), HaveField("Type", string(clusterctlv1.AddonProviderType)),
		HaveField("Version", "v0.1.0"), HaveField("ObjectMeta.Name", addonLabel),
	)), "clusterctl init recorded the addon in its inventory")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed())
	g.Expect(crd.Labels).To(HaveKeyWithValue(clusterv1.ProviderNameLabel, addonLabel))
	d := &appsv1.Deployment{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: deploymentName}, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(quickStartImage))
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(ContainSubstring("${")), "clusterctl rendered every variable")
	g.Expect(d.Labels).To(HaveKeyWithValue(clusterv1.ProviderNameLabel, addonLabel))
	q.expectNoCertManagerInstalled(ctx, g)
	in := &certManagerInstall{m: m, logs: q.logs, binaries: q.binaries, ca: q.expectCertificatesIssued(ctx, g)}
	in.injectCA(ctx, t)

	// runbooks.md's cert-manager diagnostics: both fingerprints are the components' CA's.
	diag := q.sh.Run(g, "", docblock.ShellBlock(g, filepath.Join(repoRoot, "docs"), "runbooks.md", "openssl x509"))
	q.expectDiagnostics(ctx, g, diag)

	replicas := q.runDeployment(ctx, t, d)
	ns := createNamespace(ctx, g, m, "quickstart")
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k3s-one"},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KThreesControlPlane", Name: "k3s-one",
		}},
	}
	g.Expect(m.Client.Create(ctx, cluster)).To(Succeed())
	g.Eventually(func() error {
		return m.Client.Get(ctx, client.ObjectKeyFromObject(cluster), &v1alpha1.ControlPlaneEtcd{})
	}).WithTimeout(2*time.Minute).Should(Succeed(), "the manager creates the KThreesControlPlane Cluster's ControlPlaneEtcd")

	check := q.sh.Run(g, "", docblock.ShellBlock(g, docsDir, "quick-start.md", "rollout status"))
	g.Expect(check).To(ContainSubstring(`deployment "` + deploymentName + `" successfully rolled out`))
	g.Expect(check).To(MatchRegexp(`(?m)^quickstart\s+k3s-one\s+k3s-one\s+k3s\s+Manage\b`), "kubectl lists the ControlPlaneEtcd the manager created:\n%s", check)
	for _, r := range replicas {
		g.Expect(r.running()).To(BeTrue(), "%s still runs", r)
	}

	machine := env.ControlPlaneMachine(env.MachineInput{Cluster: cluster, Name: "k3s-one-cp-0", ProviderID: "test://k3s-one/cp-0"})
	g.Expect(m.Client.Create(ctx, machine)).To(Succeed())
	g.Expect(machine.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue),
		"the hook webhook, reached through its Service with the CA cainjector put in, hooked the Machine")
	cpe := &v1alpha1.ControlPlaneEtcd{}
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cpe)).To(Succeed())

	replicas = q.upgrade(ctx, t, replicas, in.ca)
	kept := &v1alpha1.ControlPlaneEtcd{}
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(cluster), kept)).To(Succeed())
	g.Expect(kept.UID).To(Equal(cpe.UID), "the upgrade kept the ControlPlaneEtcd")
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(machine), machine)).To(Succeed())
	g.Expect(machine.Annotations).To(HaveKey(v1alpha1.PreTerminateHookAnnotation), "the upgrade kept the Machine's hook")

	q.uninstall(ctx, t, replicas, cluster, machine)
}

// upgrade lays out the release operations.md's upgrade block names beside the quick start's, as
// the page says, runs the block (clusterctl scales the Deployment down, waits until its replicas
// are gone, deletes it and creates the new one), checks what it changed and runs the new
// Deployment's replicas.
func (q *quickStart) upgrade(ctx context.Context, t *testing.T, replicas []*replica, ca *corev1.Secret) []*replica {
	t.Helper()
	g := NewWithT(t)
	m := q.m
	block := docblock.ShellBlock(g, docsDir, "operations.md", "clusterctl upgrade apply")
	match := regexp.MustCompile(`--addon ` + addonNamespace + `/` + addon + `:(v\d+\.\d+\.\d+)`).FindStringSubmatch(block)
	g.Expect(match).NotTo(BeNil(), "the upgrade block names the release:\n%s", block)
	version := match[1]
	q.layOutRelease(g, version)
	argsBefore := managerArgs(ctx, g, m)

	q.sh.Run(g, q.opsPrelude(), block)
	for _, r := range replicas {
		g.Expect(r.running()).To(BeFalse(), "the old version's %s ended when clusterctl scaled its Deployment down", r)
	}

	g.Expect(inventory(ctx, g, m)).To(ConsistOf(HaveField("Version", version)), "clusterctl recorded the upgrade")
	d := &appsv1.Deployment{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: deploymentName}, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image(version)))
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(Equal(argsBefore), "the settings came through the upgrade")
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())
	g.Eventually(func(g Gomega) [][]byte { return m.caBundles(ctx, g) }).WithTimeout(2*time.Minute).Should(HaveEach(Equal(ca.Data["ca.crt"])),
		"cainjector filled the caBundle of the webhook configurations clusterctl re-created")
	return q.runDeployment(ctx, t, d)
}

// layOutRelease builds the release version (release-manifests, as `make release-manifests`) into
// the quick start's local repository, $REPO/addon-etcd-adapter/<version>, its metadata.yaml the
// project's with the release's series added, as a release's lists every series up to it.
func (q *quickStart) layOutRelease(g Gomega, version string) {
	dir := filepath.Join(q.home(g), "etcd-adapter-release", addonLabel, version)
	out, err := exec.Command(releaseManifests, "-root", repoRoot, "-out", dir, "-image", image(version)).CombinedOutput() //nolint:gosec // the test's own arguments
	g.Expect(err).NotTo(HaveOccurred(), "release-manifests: %s", out)
	raw, err := os.ReadFile(filepath.Join(dir, "metadata.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	metadata := &clusterctlv1.Metadata{}
	g.Expect(yaml.Unmarshal(raw, metadata)).To(Succeed())
	g.Expect(releasetool.AddSeries(metadata, version)).To(Succeed())
	raw, err = yaml.Marshal(metadata)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "metadata.yaml"), raw, 0o600)).To(Succeed())
}

// uninstall runs operations.md's uninstall block step by step, with the manager's replicas
// running until step 5 scales their Deployment down: the ControlPlaneEtcds are deleted while
// they run, so they take EtcdAdapterMemberHealthy off the Machine before they stop.
func (q *quickStart) uninstall(ctx context.Context, t *testing.T, replicas []*replica, cluster *clusterv1.Cluster, machine *clusterv1.Machine) {
	t.Helper()
	g := NewWithT(t)
	m := q.m
	block := docblock.ShellBlock(g, docsDir, "operations.md", "clusterctl delete")
	step := docblock.Steps(g, block)
	g.Expect(step).To(HaveLen(6), "the uninstall block has steps 1 to 6:\n%s", block)
	pre := q.opsPrelude()
	g.Eventually(func(g Gomega) {
		g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(machine), machine)).To(Succeed())
		g.Expect(conditions.Has(machine, v1alpha1.MemberHealthyMachineCondition)).To(BeTrue())
	}).WithTimeout(2*time.Minute).Should(Succeed(), "the manager wrote EtcdAdapterMemberHealthy on the Machine (Unknown: no workload cluster answers)")

	q.sh.Run(g, pre, step["1"])
	cpe := &v1alpha1.ControlPlaneEtcd{}
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cpe)).To(Succeed())
	g.Expect(cpe.Spec.Mode).To(Equal(v1alpha1.ModeObserve), "step 1 put the ControlPlaneEtcd in Observe")
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
	g.Expect(cluster.Annotations).To(HaveKeyWithValue(v1alpha1.OptOutAnnotation, v1alpha1.AnnotationTrue), "step 1 opted the Cluster out")
	g.Eventually(func() string { return q.sh.Run(g, pre, step["2"]) }).WithTimeout(2*time.Minute).Should(BeEmpty(),
		"the manager takes the hook off in Observe, and then step 2 prints nothing")
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(machine), machine)).To(Succeed())
	g.Expect(machine.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation))

	q.sh.Run(g, pre, step["3"])
	list := &v1alpha1.ControlPlaneEtcdList{}
	g.Expect(m.Client.List(ctx, list)).To(Succeed())
	g.Expect(list.Items).To(BeEmpty(), "step 3 deletes every ControlPlaneEtcd")
	g.Eventually(func() string { return q.sh.Run(g, pre, step["4"]) }).WithTimeout(2*time.Minute).Should(BeEmpty(),
		"the manager takes EtcdAdapterMemberHealthy off once no ControlPlaneEtcd is in charge, and then step 4 prints nothing")
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(machine), machine)).To(Succeed())
	g.Expect(conditions.Has(machine, v1alpha1.MemberHealthyMachineCondition)).To(BeFalse(), "no Machine carries EtcdAdapterMemberHealthy")

	q.sh.Run(g, pre, step["5"])
	d := &appsv1.Deployment{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: deploymentName}, d)).To(Succeed())
	g.Expect(*d.Spec.Replicas).To(BeZero(), "step 5 scales the manager to 0")
	for _, r := range replicas {
		g.Eventually(r.running).WithTimeout(2*time.Minute).Should(BeFalse(), "%s ended on the scale-down", r)
	}
	g.Expect(m.Client.List(ctx, list)).To(Succeed())
	g.Expect(list.Items).To(BeEmpty(), "the opted-out Cluster got no ControlPlaneEtcd again while the manager ran")

	q.sh.Run(g, pre, step["6"])
	g.Expect(inventory(ctx, g, m)).To(BeEmpty(), "step 6 removes the inventory entry")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(m.Client.Get(ctx, client.ObjectKey{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{}))
	}).WithTimeout(time.Minute).Should(BeTrue(), "step 6 removes the CRD")
	for _, o := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: addonNamespace, Name: deploymentName}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: validatingName}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: mutatingName}},
	} {
		err := m.Client.Get(ctx, client.ObjectKeyFromObject(o), o)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "step 6 removes %T %s: %v", o, o.GetName(), err)
	}
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{})).To(Succeed(), "step 6 leaves the Cluster")
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(machine), machine)).To(Succeed(), "step 6 leaves the Machine")
	g.Expect(conditions.Has(machine, v1alpha1.MemberHealthyMachineCondition)).To(BeFalse(), "the uninstall left no EtcdAdapterMemberHealthy")
}

// home returns the shell's HOME, where the quick start's $REPO is.
func (q *quickStart) home(g Gomega) string {
	return q.sh.Run(g, "", `printf %s "$HOME"`)
}

// opsPrelude is the prelude of operations.md's blocks: the quick start's $REPO is still set in
// the reader's shell.
func (q *quickStart) opsPrelude() string {
	return q.prelude + "\nREPO=$HOME/etcd-adapter-release"
}

// TestQuickStartWithoutClusterctlInit runs docs/quick-start.md's "Without clusterctl init" block
// as the page gives it, with the real clusterctl v1.14.2 binary rendering the components, on a
// management apiserver of its own where cert-manager is installed: its controller and CA injector
// run as processes, and their Deployments stand for cert-manager's release manifest (fetched
// from GitHub in a real install). The block is judged by what it applied: the components with
// every variable rendered, server-side by kubectl, no inventory entry (clusterctl init was not
// run), and the certificates real cert-manager issues for them and injects into the webhooks.
func TestQuickStartWithoutClusterctlInit(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	q := startQuickStart(ctx, t)
	m := q.m
	q.certManagerDeployments(ctx, t)

	q.sh.Run(g, q.prelude, docblock.ShellBlock(g, docsDir, "quick-start.md", "clusterctl generate yaml"))

	g.Expect(inventory(ctx, g, m)).To(BeEmpty(), "without clusterctl init nothing is recorded in clusterctl's inventory")
	g.Expect(waitForCRDs(ctx, m.Client, crdName)).To(Succeed())
	d := &appsv1.Deployment{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: deploymentName}, d)).To(Succeed())
	c := d.Spec.Template.Spec.Containers[0]
	g.Expect(c.Image).To(Equal(quickStartImage))
	g.Expect(c.Args).NotTo(ContainElement(ContainSubstring("${")), "clusterctl generate yaml rendered every variable")
	g.Expect(c.Args).To(ContainElements("--v=2", "--observation-interval=30s"), "with the defaults")
	g.Expect(d.ManagedFields).To(ContainElement(And(
		HaveField("Manager", "kubectl"), HaveField("Operation", metav1.ManagedFieldsOperationApply),
	)), "kubectl applied the components server-side")
	q.expectNoCertManagerInstalled(ctx, g)
	ca := q.expectCertificatesIssued(ctx, g)
	g.Eventually(func(g Gomega) [][]byte { return m.caBundles(ctx, g) }).WithTimeout(2*time.Minute).Should(HaveEach(Equal(ca.Data["ca.crt"])),
		"cainjector filled every webhook's caBundle with the components' CA")
}

// quickStart is a management apiserver that reaches Services through a serviceNetwork, with
// cert-manager's CRDs and its controller running, a shell for the docs' blocks (with the real
// clusterctl on its PATH, and Cluster API's release hosts as clusterctl reaches them, see
// releaseHosts) and a working directory whose out/ holds what `make release-manifests IMG=$IMG`
// writes.
type quickStart struct {
	m        *management
	network  *serviceNetwork
	sh       *docblock.Shell
	binaries string
	logs     string
	// prelude enters the working directory, as the reader runs the blocks from the repository,
	// and sends clusterctl's requests for Cluster API's release to releaseHosts.
	prelude string
}

// startQuickStart starts a quickStart.
func startQuickStart(ctx context.Context, t *testing.T) *quickStart {
	t.Helper()
	g := NewWithT(t)
	q := &quickStart{binaries: certManagerBinaries(t), logs: logDir(t)}
	var egress string
	q.network, egress = startTestServiceNetwork(t, g)
	// The repository only records Cluster API as the management cluster's core provider (see
	// doc.go); the addon's release is the one the blocks lay out from out/.
	r := newRepository(t, "v0.1.0")
	q.m = startManagementWith(ctx, t, r, managementOptions{
		crdPaths:       []string{certManagerCRDs(t)},
		apiServerFlags: map[string]string{"egress-selector-config-file": egress},
	})
	startProcess(t, filepath.Join(q.binaries, "controller"), filepath.Join(q.logs, "cert-manager-controller.log"), "--kubeconfig="+q.m.Kubeconfig.Path)

	work := t.TempDir()
	out, err := exec.Command(releaseManifests, "-root", repoRoot, "-out", filepath.Join(work, "out"), "-image", quickStartImage).CombinedOutput() //nolint:gosec // the test's own arguments
	g.Expect(err).NotTo(HaveOccurred(), "release-manifests: %s", out)
	hosts := startReleaseHosts(t, r.coreVersion, filepath.Join(r.base, "cluster-api", r.coreVersion, "metadata.yaml"))
	q.prelude = fmt.Sprintf("cd %s\nexport HTTPS_PROXY=%s SSL_CERT_FILE=%s", work, hosts.ProxyURL(), hosts.CAFile)

	docblock.Clusterctl(g)
	q.sh = docblock.NewShell(t, g, q.m.Config)
	return q
}

// docsDir is the repository's docs directory.
var docsDir = filepath.Join(repoRoot, "docs")

// expectNoCertManagerInstalled checks that clusterctl installed no cert-manager of its own: it
// labels what it installs clusterctl.cluster.x-k8s.io/core: cert-manager, in the cert-manager
// Namespace.
func (q *quickStart) expectNoCertManagerInstalled(ctx context.Context, g Gomega) {
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &apiextensionsv1.CustomResourceDefinitionList{}} {
		g.Expect(q.m.Client.List(ctx, list, client.MatchingLabels{clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreLabelCertManagerValue})).To(Succeed())
		g.Expect(list).To(HaveField("Items", BeEmpty()), "clusterctl installed no cert-manager")
	}
}

// expectCertificatesIssued waits until cert-manager issued the components' certificates and
// returns their CA's Secret.
func (q *quickStart) expectCertificatesIssued(ctx context.Context, g Gomega) *corev1.Secret {
	for _, name := range []string{caCertificate, servingCertificate, metricsCertificate} {
		g.Eventually(func() bool { return q.m.certificateReady(ctx, g, name) }).WithTimeout(3*time.Minute).Should(BeTrue(), "cert-manager issued Certificate %s", name)
	}
	ca := q.m.secret(ctx, g, caSecret)
	verifyLeaf(g, q.m.secret(ctx, g, servingSecret), ca, webhookService+"."+addonNamespace+".svc")
	return ca
}

// fingerprintLine is what `openssl x509 -noout -enddate -fingerprint` prints for the fingerprint.
var fingerprintLine = regexp.MustCompile(`(?m)^(?:SHA1 |sha1 )?Fingerprint=([0-9A-F:]+)$`)

// expectDiagnostics checks runbooks.md's diagnostics output: the Issuers and Certificates READY
// True, and the caBundle's and the Secret's CA fingerprints both the components' CA's.
func (q *quickStart) expectDiagnostics(ctx context.Context, g Gomega, out string) {
	for _, name := range []string{"issuer.cert-manager.io/etcd-adapter-selfsigned-issuer", "certificate.cert-manager.io/" + servingCertificate} {
		g.Expect(out).To(MatchRegexp(`(?m)^`+regexp.QuoteMeta(name)+`\s+True\b`), "the block shows %s READY True:\n%s", name, out)
	}
	ca, _ := pem.Decode(q.m.secret(ctx, g, caSecret).Data["tls.crt"])
	g.Expect(ca).NotTo(BeNil())
	sum := sha1.Sum(ca.Bytes) //nolint:gosec // compared with openssl's default fingerprint
	hex := make([]string, len(sum))
	for i, b := range sum {
		hex[i] = fmt.Sprintf("%02X", b)
	}
	var got []string
	for _, m := range fingerprintLine.FindAllStringSubmatch(out, -1) {
		got = append(got, m[1])
	}
	g.Expect(got).To(HaveExactElements(strings.Join(hex, ":"), strings.Join(hex, ":")),
		"the caBundle and the Secret's ca.crt are both the components' CA:\n%s", out)
	g.Expect(regexp.MustCompile(`(?m)^notAfter=`).FindAllString(out, -1)).To(HaveLen(2))
}

// runDeployment runs the Deployment's replicas as manager processes (startReplica), routes the
// webhook Service to them, and once each answered its readiness probe writes the Deployment's
// status as the kubelet and the Deployment controller would (neither runs here): every replica
// updated, ready and available. The block that reads it (`kubectl rollout status`) is judged on
// that status, which the processes being up and ready earned.
func (q *quickStart) runDeployment(ctx context.Context, t *testing.T, d *appsv1.Deployment) []*replica {
	t.Helper()
	g := NewWithT(t)
	bin, err := managerproc.Build(ctx, t.TempDir(), q.m.Config)
	g.Expect(err).NotTo(HaveOccurred())
	var replicas []*replica
	for i := range int(*d.Spec.Replicas) {
		replicas = append(replicas, q.m.startReplica(ctx, t, bin, d, q.logs, fmt.Sprintf("replica-%d", i)))
	}
	webhookAddr, backends := q.m.serviceBackends(ctx, g, d, webhookService, replicas...)
	for i, r := range replicas {
		q.network.readiness(backends[i], r.running)
	}
	q.network.route(webhookAddr, backends...)
	// Each replica answered /readyz, the readinessProbe's path, before startReplica returned
	// (managerproc.Start); the status says so while they run.
	g.Expect(d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
	for _, r := range replicas {
		g.Expect(r.running()).To(BeTrue(), "%s runs", r)
	}
	n := *d.Spec.Replicas
	q.setDeploymentAvailable(ctx, g, client.ObjectKeyFromObject(d), n)
	q.followScaleDown(ctx, t, d, replicas)
	return replicas
}

// followScaleDown plays the Deployment controller and the kubelet when d is scaled to 0
// (clusterctl upgrade does it before it deletes the Deployment, the uninstall's step 3 does it):
// the Pods end, here the replicas' processes stop, and the status says no replica is left
// (k8s.io/kubernetes pkg/controller/deployment, the ReplicaSet scaled down and the status
// recalculated), which clusterctl waits for.
func (q *quickStart) followScaleDown(ctx context.Context, t *testing.T, d *appsv1.Deployment, replicas []*replica) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			cur := &appsv1.Deployment{}
			if err := q.m.Client.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil || cur.UID != d.UID || cur.Spec.Replicas == nil || *cur.Spec.Replicas != 0 {
				continue
			}
			for _, r := range replicas {
				if err := r.Stop(); err != nil {
					t.Errorf("%s did not stop cleanly on the scale-down: %v", r, err)
				}
			}
			cur.Status = appsv1.DeploymentStatus{ObservedGeneration: cur.Generation}
			if err := q.m.Client.Status().Update(ctx, cur); err != nil {
				t.Logf("writing the scaled-down Deployment's status: %v", err)
				continue
			}
			return
		}
	}()
}

// setDeploymentAvailable writes the status the Deployment controller writes once n replicas of
// the current template are available (k8s.io/kubernetes pkg/controller/deployment/sync.go,
// calculateStatus; the Available and Progressing conditions of a complete rollout).
func (q *quickStart) setDeploymentAvailable(ctx context.Context, g Gomega, key client.ObjectKey, n int32) {
	d := &appsv1.Deployment{}
	g.Expect(q.m.Client.Get(ctx, key, d)).To(Succeed())
	now := metav1.Now()
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
		},
	}
	g.Expect(q.m.Client.Status().Update(ctx, d)).To(Succeed())
}

// certManagerDeployments creates cert-manager's controller and cainjector Deployments in the
// cert-manager Namespace, as cert-manager's release manifest does (cert-manager's own image, one
// replica), starts cainjector as the controller already runs, and writes each Deployment's
// status Available while its process runs, playing the kubelet and the Deployment controller:
// the quick start's block waits for that before it applies the components.
func (q *quickStart) certManagerDeployments(ctx context.Context, t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(q.m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cert-manager"}})).To(Succeed())
	cainjector := startProcess(t, filepath.Join(q.binaries, "cainjector"), filepath.Join(q.logs, "cert-manager-cainjector.log"), "--kubeconfig="+q.m.Kubeconfig.Path)
	// hack/build-cert-manager.sh names the directory cert-manager-<version>-<sources' sum>.
	version, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(q.binaries), "cert-manager-"), "-")
	for name, image := range map[string]string{
		"cert-manager":            "quay.io/jetstack/cert-manager-controller:" + version,
		"cert-manager-cainjector": "quay.io/jetstack/cert-manager-cainjector:" + version,
	} {
		labels := map[string]string{"app.kubernetes.io/name": name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "cert-manager", Name: name, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}},
				},
			},
		}
		g.Expect(q.m.Client.Create(ctx, d)).To(Succeed())
	}
	g.Expect(cainjector.running()).To(BeTrue(), "cainjector runs")
	for _, name := range []string{"cert-manager", "cert-manager-cainjector"} {
		q.setDeploymentAvailable(ctx, g, client.ObjectKey{Namespace: "cert-manager", Name: name}, 1)
	}
	err := q.m.Client.Get(ctx, client.ObjectKey{Name: addonNamespace}, &corev1.Namespace{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the block creates %s", addonNamespace)
}
