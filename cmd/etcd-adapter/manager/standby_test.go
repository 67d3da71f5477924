package manager

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/webhooks/quorumguard"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// TestStandby_quorumGuardAnswersAsTheLeader runs two managers under leader election against one
// management cluster with a kubeadm and a K3s workload cluster, both in Observe mode (KCP's case:
// the guard is the only check), each with one etcd member stopped. The second manager starts
// after the first leads, as the surge Pod of a rolling update does, and never leads. Once it
// reports Ready, the same admission request (DELETE of a healthy control-plane Machine) sent to
// each manager's own webhook server is refused by both, with the same reason, naming the stopped
// member.
//
// Note: the standby's ClusterCache connects with one worker, so that a ClusterCache reconciler
// stuck after its first connect (it sends to every GetClusterSource consumer, which on a replica
// that does not lead must still read) leaves the second Cluster unconnected and fails the test.
func TestStandby_quorumGuardAnswersAsTheLeader(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := createNamespace(ctx, g)
	wh := mgmt.WebhookInstallOptions()

	// The leader serves the webhooks where the management apiserver calls them, so that the
	// Machines below can be created (the Machine hook webhook fails closed).
	leaderOpts, leaderHealth, _ := testOptions(g)
	leaderOpts.LeaderElection, leaderOpts.LeaderElectionNamespace = true, ns
	leaderOpts.WebhookHost, leaderOpts.WebhookPort, leaderOpts.WebhookCertDir = wh.LocalServingHost, wh.LocalServingPort, wh.LocalServingCertDir
	leader := startManager(ctx, t, leaderOpts)
	select {
	case <-leader.Elected():
	case <-ctx.Done():
		t.Fatal("the first manager was never elected")
	}
	g.Eventually(func() (int, error) { return statusOf("http://" + leaderHealth + "/readyz") }).WithTimeout(time.Minute).Should(Equal(http.StatusOK))

	kubeadm := startKubeadmWorkload(ctx, t, g, ns)
	k3s := startK3sWorkload(ctx, t, g, ns)

	// The standby starts now, as a new replica does while the leader runs.
	standbyOpts, standbyHealth, _ := testOptions(g)
	standbyOpts.LeaderElection, standbyOpts.LeaderElectionNamespace = true, ns
	standbyOpts.ClusterCacheConcurrency = 1
	_, port, err := net.SplitHostPort(freeAddr(g))
	g.Expect(err).NotTo(HaveOccurred())
	standbyOpts.WebhookHost, standbyOpts.WebhookCertDir = wh.LocalServingHost, wh.LocalServingCertDir
	standbyOpts.WebhookPort, err = strconv.Atoi(port)
	g.Expect(err).NotTo(HaveOccurred())
	standby := startManager(ctx, t, standbyOpts)
	g.Eventually(func() (int, error) { return statusOf("http://" + standbyHealth + "/readyz") }).
		WithTimeout(2*time.Minute).Should(Equal(http.StatusOK), "the standby must become Ready without leading, or a rolling update never completes")

	replicas := map[string]string{
		"leader":  fmt.Sprintf("https://%s:%d%s", wh.LocalServingHost, wh.LocalServingPort, quorumguard.Path),
		"standby": fmt.Sprintf("https://%s:%d%s", wh.LocalServingHost, standbyOpts.WebhookPort, quorumguard.Path),
	}
	httpClient := webhookClient(g, wh.LocalServingCAData)
	for _, wl := range []*guardedWorkload{kubeadm, k3s} {
		review := deleteReview(g, wl.healthy)
		// Both replicas must refuse; the K3s members' health reaches either replica through the
		// Node informer of its own workload connection, so the answer may take a moment to turn.
		g.Eventually(func(g Gomega) {
			reasons := map[string]string{}
			for name, url := range replicas {
				resp := postReview(g, httpClient, url, review)
				g.Expect(resp.Allowed).To(BeFalse(), "%s: the %s replica let the deletion through (warnings %v)", wl.backend, name, resp.Warnings)
				g.Expect(resp.Result).NotTo(BeNil())
				g.Expect(resp.Result.Message).To(And(ContainSubstring("would lose etcd quorum"), ContainSubstring(wl.stopped)),
					"%s: the %s replica's refusal", wl.backend, name)
				reasons[name] = refusalReason(resp.Result.Message)
			}
			g.Expect(reasons["standby"]).To(And(Not(BeEmpty()), Equal(reasons["leader"])), "%s: refusal reasons %v", wl.backend, reasons)
		}).WithTimeout(time.Minute).Should(Succeed())
	}

	select {
	case <-standby.Elected():
		t.Fatal("the standby was elected while the leader ran; the test did not ask a standby")
	default:
	}
}

// guardedWorkload is a registered workload cluster with one member stopped.
type guardedWorkload struct {
	backend v1alpha1.Backend
	// healthy is a control-plane Machine whose member answers; deleting it must be refused.
	healthy *clusterv1.Machine
	// stopped is the name of the stopped member.
	stopped string
}

func startKubeadmWorkload(ctx context.Context, t *testing.T, g Gomega, ns string) *guardedWorkload {
	wl, err := workload.StartKubeadm(ctx, workload.KubeadmOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = wl.Close() })
	return guardWorkload(ctx, g, ns, v1alpha1.BackendKubeadm, wl.APIServer, wl.Etcd, wl.Nodes)
}

func startK3sWorkload(ctx context.Context, t *testing.T, g Gomega, ns string) *guardedWorkload {
	wl, err := workload.StartK3s(ctx, workload.K3sOptions{Tick: 200 * time.Millisecond})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = wl.Close() })
	return guardWorkload(ctx, g, ns, v1alpha1.BackendK3s, wl.APIServer, wl.Etcd, wl.Nodes)
}

// guardWorkload registers the workload cluster, binds a control-plane Machine to every Node,
// creates its ControlPlaneEtcd in Observe mode, waits until the leader reports every member, and
// stops the member of the last Node.
func guardWorkload(ctx context.Context, g Gomega, ns string, backend v1alpha1.Backend, api *env.APIServer, etcd *etcdcluster.Cluster, nodes []string) *guardedWorkload {
	name := string(backend)
	cluster, err := env.RegisterCluster(ctx, mgmt.Client, env.ClusterInput{Namespace: ns, Name: name, Workload: api.Config,
		EtcdCACert: etcd.CA().CertPEM(), EtcdCAKey: etcd.CA().KeyPEM()})
	g.Expect(err).NotTo(HaveOccurred())
	machines := map[string]*clusterv1.Machine{}
	for _, node := range nodes {
		providerID := fmt.Sprintf("test://%s/%s/%s", ns, name, node)
		n := &corev1.Node{}
		g.Expect(api.Client.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
		before := n.DeepCopy()
		n.Spec.ProviderID = providerID
		g.Expect(api.Client.Patch(ctx, n, client.MergeFrom(before))).To(Succeed())
		m, err := env.CreateControlPlaneMachine(ctx, mgmt.Client, env.MachineInput{Cluster: cluster, Name: name + "-" + node, ProviderID: providerID})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func(g Gomega) {
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
			g.Expect(m.Status.NodeRef.Name).To(Equal(node))
		}).WithTimeout(time.Minute).Should(Succeed(), "Cluster API must bind Machine %s to Node %s", m.Name, node)
		machines[node] = m
	}
	cpe := &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: name, Backend: backend, Mode: v1alpha1.ModeObserve,
			ObservationInterval: &metav1.Duration{Duration: time.Second}},
	}
	g.Expect(mgmt.Client.Create(ctx, cpe)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cpe), cpe)).To(Succeed())
		g.Expect(cpe.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(len(nodes))))
	}).WithTimeout(time.Minute).Should(Succeed(), "the leader must report every %s member healthy", backend)

	stoppedNode := nodes[len(nodes)-1]
	stopped := etcd.MemberOnNode(stoppedNode).Name()
	g.Expect(etcd.StopMember(ctx, stopped)).To(Succeed())
	return &guardedWorkload{backend: backend, healthy: machines[nodes[0]], stopped: stopped}
}

// startManager builds the manager with o and runs it until the test ends.
func startManager(ctx context.Context, t *testing.T, o *Options) ctrl.Manager {
	t.Helper()
	mgr, err := New(ctx, mgmt.Config, o)
	if err != nil {
		t.Fatalf("failed to build the manager: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the manager stopped with an error: %v", err)
		}
	})
	return mgr
}

func webhookClient(g Gomega, caPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(caPEM)).To(BeTrue(), "the webhook serving CA")
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
}

// deleteReview is the AdmissionReview the management apiserver sends the quorum guard for
// `kubectl delete machine`.
func deleteReview(g Gomega, m *clusterv1.Machine) []byte {
	old := m.DeepCopy()
	old.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("Machine"))
	raw, err := json.Marshal(old)
	g.Expect(err).NotTo(HaveOccurred())
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       uuid.NewUUID(),
			Kind:      metav1.GroupVersionKind{Group: clusterv1.GroupVersion.Group, Version: clusterv1.GroupVersion.Version, Kind: "Machine"},
			Resource:  metav1.GroupVersionResource{Group: clusterv1.GroupVersion.Group, Version: clusterv1.GroupVersion.Version, Resource: "machines"},
			Namespace: m.Namespace, Name: m.Name,
			Operation: admissionv1.Delete,
			OldObject: runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(review)
	g.Expect(err).NotTo(HaveOccurred())
	return body
}

func postReview(g Gomega, c *http.Client, url string, body []byte) *admissionv1.AdmissionResponse {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body)) //nolint:noctx // bounded by the client's timeout
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	out := &admissionv1.AdmissionReview{}
	g.Expect(json.NewDecoder(resp.Body).Decode(out)).To(Succeed())
	g.Expect(out.Response).NotTo(BeNil())
	return out.Response
}

// refusalReason is the verdict's reason in a refusal ("... of Cluster x (WouldLoseQuorum): ...").
func refusalReason(msg string) string {
	m := regexp.MustCompile(`would lose etcd quorum of Cluster \S+ \(([A-Za-z]+)\)`).FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	return m[1]
}
