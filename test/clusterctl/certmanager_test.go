package clusterctl

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/managerproc"
)

// The components' cert-manager objects and the Services, after config/default's namePrefix.
const (
	caCertificate      = "etcd-adapter-selfsigned-ca"
	caSecret           = "etcd-adapter-ca"
	servingCertificate = "etcd-adapter-serving-cert"
	servingSecret      = "etcd-adapter-webhook-service-cert"
	metricsCertificate = "etcd-adapter-metrics-cert"
	metricsSecret      = "etcd-adapter-metrics-server-cert"
	webhookService     = "etcd-adapter-webhook-service"
	metricsService     = "etcd-adapter-metrics-service"
)

// errNoHook is an admission of the hook webhook's Machine without the pre-terminate hook.
var errNoHook = errors.New("the Machine was admitted without the pre-terminate hook")

var certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// TestInstallWithCertManager installs etcd-adapter as users do, with real cert-manager: its
// controller and CA injector (v1.21.2, hack/tools/cert-manager) run as processes against the
// management apiserver with cert-manager's own CRDs, clusterctl init installs the addon from the
// local repository, cert-manager issues the components' CA, webhook and metrics certificates, and
// the manager runs as its own process with the rendered Deployment's args, reading its serving
// certificate from the Secret cert-manager wrote (kept in step as the kubelet keeps a Secret
// volume). kube-apiserver calls the webhooks through their Service by name (serviceNetwork says
// how). On the way it shows what breaks without each piece: before cainjector runs, the caBundle
// is empty and the hook webhook's admission (failurePolicy Fail) fails; a Service routed to the
// wrong backend fails it too. Then cert-manager renews the serving certificate and the manager
// serves the new one without a restart, while admissions polled throughout all succeed.
func TestInstallWithCertManager(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	in := installWithCertManager(ctx, t)
	m, network, logs, ca := in.m, in.network, in.logs, in.ca

	d, bin := in.deployment, in.bin
	manager := m.startReplica(ctx, t, bin, d, logs, "manager")
	webhookAddr, backends := m.serviceBackends(ctx, g, d, webhookService, manager)
	network.route(webhookAddr, backends...)
	machine := m.hookedCluster(ctx, g)

	g.Expect(m.caBundles(ctx, g)).To(HaveEach(BeEmpty()), "nothing but cert-manager's CA injector fills the caBundle")
	g.Expect(m.dryRunMachine(ctx, machine)).To(MatchError(ContainSubstring("x509")),
		"without the injected CA kube-apiserver does not trust the webhook, and the hook webhook fails closed")

	in.injectCA(ctx, t)

	before := network.connected(webhookAddr)
	g.Eventually(func() error { return m.hookAdded(ctx, machine) }).WithTimeout(time.Minute).Should(Succeed())
	g.Expect(network.connected(webhookAddr)).To(BeNumerically(">", before), "kube-apiserver reached the webhook through its Service")
	g.Expect(servedLeaf(g, manager.addr(d, "webhook-server"), webhookService+"."+addonNamespace+".svc", ca)).
		To(Equal(leaf(g, m.secret(ctx, g, servingSecret))), "the webhook serves cert-manager's certificate")
	g.Expect(servedLeaf(g, manager.addr(d, "metrics"), metricsService+"."+addonNamespace+".svc", ca)).
		To(Equal(leaf(g, m.secret(ctx, g, metricsSecret))), "the metrics endpoint serves cert-manager's certificate")

	// The Service routed to the wrong backend (the metrics port, whose certificate names another
	// Service): kube-apiserver refuses the certificate, the admission fails.
	network.route(webhookAddr, manager.addr(d, "metrics"))
	// Eventually: a request may still meet a connection of the old route closing.
	g.Eventually(func() error { return m.dryRunMachine(ctx, machine) }).WithTimeout(time.Minute).Should(MatchError(ContainSubstring(metricsService)))
	network.route(webhookAddr, backends...)
	g.Eventually(func() error { return m.hookAdded(ctx, machine) }).WithTimeout(time.Minute).Should(Succeed())

	m.rotateServingCertificate(ctx, t, g, network, manager, d, machine, ca)
}

// certManagerInstall is a management cluster where clusterctl installed etcd-adapter and real
// cert-manager issued its certificates.
type certManagerInstall struct {
	m          *management
	network    *serviceNetwork
	logs       string
	binaries   string
	ca         *corev1.Secret
	deployment *appsv1.Deployment
	bin        managerproc.Binary
}

// installWithCertManager starts a management cluster whose kube-apiserver reaches Services
// through a serviceNetwork, with cert-manager's CRDs and its controller running as a process,
// runs clusterctl init of etcd-adapter, and waits until cert-manager issued the components' CA,
// webhook and metrics certificates. cainjector is not started. It builds the manager binary.
func installWithCertManager(ctx context.Context, t *testing.T) *certManagerInstall {
	t.Helper()
	g := NewWithT(t)
	in := &certManagerInstall{binaries: certManagerBinaries(t)}
	var egress string
	in.network, egress = startTestServiceNetwork(t, g)
	r := newRepository(t, "v0.1.0")
	m := startManagementWith(ctx, t, r, managementOptions{
		crdPaths:       []string{certManagerCRDs(t)},
		apiServerFlags: map[string]string{"egress-selector-config-file": egress},
	})
	in.m, in.logs = m, logDir(t)

	start := time.Now()
	startProcess(t, filepath.Join(in.binaries, "controller"), filepath.Join(in.logs, "cert-manager-controller.log"), "--kubeconfig="+m.Kubeconfig.Path)
	r.install(ctx, t, m, "v0.1.0")
	t.Logf("clusterctl init with real cert-manager took %s", time.Since(start).Round(time.Millisecond))
	for _, name := range []string{caCertificate, servingCertificate, metricsCertificate} {
		g.Eventually(func() bool { return m.certificateReady(ctx, g, name) }).WithTimeout(3*time.Minute).Should(BeTrue(), "cert-manager issued Certificate %s", name)
	}
	t.Logf("cert-manager issued the components' certificates %s after it started", time.Since(start).Round(time.Millisecond))
	in.ca = m.secret(ctx, g, caSecret)
	verifyLeaf(g, m.secret(ctx, g, servingSecret), in.ca, webhookService+"."+addonNamespace+".svc")
	verifyLeaf(g, m.secret(ctx, g, metricsSecret), in.ca, metricsService+"."+addonNamespace+".svc")

	in.deployment = &appsv1.Deployment{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: deploymentName}, in.deployment)).To(Succeed())
	var err error
	in.bin, err = managerproc.Build(ctx, t.TempDir(), m.Config)
	g.Expect(err).NotTo(HaveOccurred())
	return in
}

// injectCA starts cainjector and waits until it filled every webhook's caBundle.
func (in *certManagerInstall) injectCA(ctx context.Context, t *testing.T) {
	t.Helper()
	injecting := time.Now()
	startProcess(t, filepath.Join(in.binaries, "cainjector"), filepath.Join(in.logs, "cert-manager-cainjector.log"), "--kubeconfig="+in.m.Kubeconfig.Path)
	NewWithT(t).Eventually(func(g Gomega) [][]byte { return in.m.caBundles(ctx, g) }).WithTimeout(2*time.Minute).Should(HaveEach(Equal(in.ca.Data["ca.crt"])),
		"cainjector filled every webhook's caBundle of both configurations with the components' CA")
	t.Logf("cainjector injected the CA %s after it started", time.Since(injecting).Round(time.Millisecond))
}

// rotateServingCertificate makes cert-manager renew the webhook's serving certificate as
// `cmctl renew` does (the Issuing condition set on the Certificate), waits until the manager
// serves the new one, has kube-apiserver connect anew (its pooled connections would keep the
// old handshake) and checks that the admissions polled throughout all succeeded with the hook,
// and that the manager did not restart.
func (m *management) rotateServingCertificate(ctx context.Context, t *testing.T, g Gomega, network *serviceNetwork, r *replica, d *appsv1.Deployment, machine *clusterv1.Machine, ca *corev1.Secret) {
	t.Helper()
	old := leaf(g, m.secret(ctx, g, servingSecret))
	poll := m.pollAdmissions(ctx, machine)
	m.renew(ctx, g, servingCertificate)
	var renewed []byte
	g.Eventually(func() []byte {
		renewed = leaf(g, m.secret(ctx, g, servingSecret))
		return renewed
	}).WithTimeout(2*time.Minute).ShouldNot(Equal(old), "cert-manager wrote a renewed certificate")
	g.Eventually(func() []byte {
		return servedLeaf(g, r.addr(d, "webhook-server"), webhookService+"."+addonNamespace+".svc", ca)
	}).WithTimeout(2*time.Minute).Should(Equal(renewed), "the manager serves the renewed certificate")
	webhookAddr, backends := m.serviceBackends(ctx, g, d, webhookService, r)
	before, connects := poll.admitted(), network.connected(webhookAddr)
	network.route(webhookAddr, backends...)
	g.Eventually(poll.admitted).WithTimeout(time.Minute).Should(BeNumerically(">=", before+10), "admissions on connections made after the renewal")
	g.Expect(network.connected(webhookAddr)).To(BeNumerically(">", connects))
	ok, failures := poll.stop()
	t.Logf("%d admissions during and after the rotation", ok)
	g.Expect(failures).To(BeEmpty(), "no admission failed or went without the hook during the rotation")
	select {
	case <-r.Done():
		t.Fatalf("the manager ended during the rotation: %v", r.Err())
	default:
	}
}

// admissionPoll dry-runs the creation of a Machine every 100 ms until stopped.
type admissionPoll struct {
	mu       sync.Mutex
	ok       int
	failures []string
	// failed holds when each failed admission was asked.
	failed []time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// pollAdmissions starts an admissionPoll of machine.
func (m *management) pollAdmissions(ctx context.Context, machine *clusterv1.Machine) *admissionPoll {
	ctx, cancel := context.WithCancel(ctx)
	p := &admissionPoll{cancel: cancel}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for ctx.Err() == nil {
			asked := time.Now()
			err := m.hookAdded(ctx, machine)
			p.mu.Lock()
			if err == nil {
				p.ok++
			} else if ctx.Err() == nil {
				p.failures = append(p.failures, err.Error())
				p.failed = append(p.failed, asked)
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return p
}

// admitted returns how many admissions got the hook so far.
func (p *admissionPoll) admitted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok
}

// stop ends the poll and returns how many admissions got the hook and the errors of the others.
func (p *admissionPoll) stop() (int, []string) {
	p.cancel()
	p.wg.Wait()
	return p.ok, p.failures
}

// hookedCluster creates a Cluster with a ControlPlaneEtcd, and returns a control-plane Machine of
// it (not created) that the hook webhook puts the pre-terminate hook on.
func (m *management) hookedCluster(ctx context.Context, g Gomega) *clusterv1.Machine {
	ns := createNamespace(ctx, g, m, "certmanager")
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "managed"},
		Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}}}
	g.Expect(m.Client.Create(ctx, c)).To(Succeed())
	g.Expect(m.Client.Create(ctx, newControlPlaneEtcd(c))).To(Succeed())
	return env.ControlPlaneMachine(env.MachineInput{Cluster: c, Name: "managed-cp-0", ProviderID: "test://managed/cp-0"})
}

// dryRunMachine dry-runs the creation of a copy of machine and returns the admitted object.
func (m *management) dryRunMachine(ctx context.Context, machine *clusterv1.Machine) error {
	_, err := m.admit(ctx, machine)
	return err
}

func (m *management) admit(ctx context.Context, machine *clusterv1.Machine) (*clusterv1.Machine, error) {
	c := machine.DeepCopy()
	if err := m.Client.Create(ctx, c, client.DryRunAll); err != nil {
		return nil, err
	}
	return c, nil
}

// hookAdded dry-runs the creation of machine and returns an error unless it was admitted with
// the pre-terminate hook.
func (m *management) hookAdded(ctx context.Context, machine *clusterv1.Machine) error {
	c, err := m.admit(ctx, machine)
	if err != nil {
		return err
	}
	if c.Annotations[v1alpha1.PreTerminateHookAnnotation] != v1alpha1.PreTerminateHookValue {
		return errNoHook
	}
	return nil
}

// caBundles returns the caBundle of every webhook of both configurations.
func (m *management) caBundles(ctx context.Context, g Gomega) [][]byte {
	var bundles [][]byte
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Name: validatingName}, v)).To(Succeed())
	for _, w := range v.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	mu := &admissionregistrationv1.MutatingWebhookConfiguration{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Name: mutatingName}, mu)).To(Succeed())
	for _, w := range mu.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	g.Expect(bundles).NotTo(BeEmpty())
	return bundles
}

// certificateReady reports whether the addon's Certificate name has Ready True.
func (m *management) certificateReady(ctx context.Context, g Gomega, name string) bool {
	for _, c := range m.certificateConditions(ctx, g, name) {
		if c["type"] == "Ready" {
			return c["status"] == "True"
		}
	}
	return false
}

func (m *management) certificate(ctx context.Context, g Gomega, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(certificateGVK)
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: name}, u)).To(Succeed())
	return u
}

func (m *management) certificateConditions(ctx context.Context, g Gomega, name string) []map[string]any {
	list, _, err := unstructured.NestedSlice(m.certificate(ctx, g, name).Object, "status", "conditions")
	g.Expect(err).NotTo(HaveOccurred())
	var out []map[string]any
	for _, c := range list {
		if cm, ok := c.(map[string]any); ok {
			out = append(out, cm)
		}
	}
	return out
}

// renew sets the Issuing condition on the Certificate, as `cmctl renew` does
// (cert-manager's cmd/ctl pkg/renew: reason ManuallyTriggered), which cert-manager's trigger
// controller takes as the request to issue it again.
func (m *management) renew(ctx context.Context, g Gomega, name string) {
	g.Eventually(func() error {
		u := m.certificate(ctx, g, name)
		conditions, _, err := unstructured.NestedSlice(u.Object, "status", "conditions")
		if err != nil {
			return err
		}
		conditions = append(conditions, map[string]any{
			"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
			"message":            "Certificate re-issuance manually triggered",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
			"observedGeneration": u.GetGeneration(),
		})
		if err := unstructured.SetNestedSlice(u.Object, conditions, "status", "conditions"); err != nil {
			return err
		}
		return m.Client.Status().Update(ctx, u)
	}).WithTimeout(time.Minute).Should(Succeed())
}

func (m *management) secret(ctx context.Context, g Gomega, name string) *corev1.Secret {
	s := &corev1.Secret{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: name}, s)).To(Succeed())
	return s
}

// leaf returns the DER of the Secret's tls.crt (its first certificate).
func leaf(g Gomega, s *corev1.Secret) []byte {
	b, _ := pem.Decode(s.Data["tls.crt"])
	g.Expect(b).NotTo(BeNil(), "Secret %s holds a PEM tls.crt", s.Name)
	return b.Bytes
}

// verifyLeaf checks that the Secret's certificate is signed by the CA Secret's and valid for
// dnsName, and that its ca.crt is that CA.
func verifyLeaf(g Gomega, s, ca *corev1.Secret, dnsName string) {
	cert, err := x509.ParseCertificate(leaf(g, s))
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(ca.Data["tls.crt"])).To(BeTrue())
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: dnsName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	g.Expect(err).NotTo(HaveOccurred(), "Secret %s: a serving certificate for %s from the components' CA", s.Name, dnsName)
	g.Expect(bytes.TrimSpace(s.Data["ca.crt"])).To(Equal(bytes.TrimSpace(ca.Data["tls.crt"])))
}

// servedLeaf connects to addr as kube-apiserver (or a scraper) does, verifying the certificate
// for serverName against the CA, and returns the certificate served (nil when the handshake
// fails).
func servedLeaf(g Gomega, addr, serverName string, ca *corev1.Secret) []byte {
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(ca.Data["ca.crt"])).To(BeTrue())
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0].Raw
}
