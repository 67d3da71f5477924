package kubeadm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/etcdtest"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
	workloadenv "github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// startTimeout bounds starting one workload cluster on a busy machine.
const startTimeout = 2 * time.Minute

var clusterSeq atomic.Int32

// workloadCluster is one kubeadm-flavoured workload cluster (test/env/workload: a real TLS
// etcd cluster whose members are named after their Nodes, a kubelet stand-in per Node
// forwarding 2379 to its member, the etcd mirror Pods), registered in the management cluster
// with its kubeconfig and etcd CA Secrets.
type workloadCluster struct {
	*workloadenv.Kubeadm
	apiServer *env.APIServer
	etcd      *etcdcluster.Cluster
	key       client.ObjectKey
	uid       string
	nodes     []string
}

// startWorkloadCluster starts a workload cluster of n members on apiServer; everything stops
// with the test.
func startWorkloadCluster(t testing.TB, apiServer *env.APIServer, n int) *workloadCluster {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	prefix := fmt.Sprintf("kc%d", clusterSeq.Add(1))
	k, err := workloadenv.StartKubeadm(ctx, workloadenv.KubeadmOptions{APIServer: apiServer, Members: n, NodePrefix: prefix})
	g.Expect(err).NotTo(HaveOccurred())
	// Runs after Close: the shared apiserver then shows the next cluster only its own Nodes and
	// etcd Pods, as a workload cluster's own apiserver would (the backend asks every etcd Pod).
	t.Cleanup(func() { forgetNodes(apiServer, prefix+"-") })
	t.Cleanup(func() { _ = k.Close() })
	w := &workloadCluster{Kubeadm: k, apiServer: apiServer, etcd: k.Etcd, nodes: k.Nodes}
	w.register(ctx, t, prefix)
	return w
}

// register creates the Cluster with its Secrets and waits until the ClusterCache connected.
func (w *workloadCluster) register(ctx context.Context, t testing.TB, name string) {
	t.Helper()
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kubeadm-"}}
	g.Expect(mgmt.Client.Create(ctx, ns)).To(Succeed())
	ca := w.etcd.CA()
	cluster, err := env.RegisterCluster(ctx, mgmt.Client, env.ClusterInput{
		Namespace: ns.Name, Name: name, Workload: w.apiServer.Config,
		EtcdCACert: ca.CertPEM(), EtcdCAKey: ca.KeyPEM(),
	})
	g.Expect(err).NotTo(HaveOccurred())
	w.key, w.uid = client.ObjectKeyFromObject(cluster), string(cluster.UID)
	g.Eventually(func() error {
		_, err := mgmt.ClusterCache.GetRESTConfig(ctx, w.key)
		return err
	}).WithTimeout(startTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// backend returns a Backend for the cluster, reaching it through the ClusterCache and reading
// the CA Secret through the Secret caching client (as KCP does), closed
// with the test.
func (w *workloadCluster) backend(t testing.TB, mutate ...func(*Config)) *Backend {
	t.Helper()
	cfg := Config{
		Cluster: w.key, ClusterUID: typesUID(w.uid),
		RESTConfig: FromClusterCache(mgmt.ClusterCache, w.key),
		Client:     secretClient,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := New(cfg)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func (w *workloadCluster) kubelet(node string) *kubelet.Kubelet { return w.Kubelet(node) }

// forgetNodes deletes the Nodes whose name starts with prefix, and their etcd Pods, from the
// apiserver.
func forgetNodes(apiServer *env.APIServer, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods := &corev1.PodList{}
	if err := apiServer.Client.List(ctx, pods, client.InNamespace(metav1.NamespaceSystem)); err == nil {
		for i := range pods.Items {
			if strings.HasPrefix(pods.Items[i].Spec.NodeName, prefix) {
				_ = apiServer.Client.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0))
			}
		}
	}
	nodes := &corev1.NodeList{}
	if err := apiServer.Client.List(ctx, nodes); err == nil {
		for i := range nodes.Items {
			if strings.HasPrefix(nodes.Items[i].Name, prefix) {
				_ = apiServer.Client.Delete(ctx, &nodes.Items[i])
			}
		}
	}
}

// harness runs the conformance suite on the kubeadm backend.
type harness struct{}

var _ etcdtest.Harness = harness{}

// Start starts a workload cluster (on its own apiserver when isolated) and a Backend for it.
func (harness) Start(t *testing.T, spec etcdtest.Spec) *etcdtest.Env {
	t.Helper()
	apiServer := workload
	if spec.Isolated {
		s, err := env.StartAPIServer(env.WorkloadAPIServerOptions())
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = s.Stop() })
		apiServer = s
	}
	w := startWorkloadCluster(t, apiServer, spec.Members)
	version, err := w.etcd.Version(t.Context())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return &etcdtest.Env{Cluster: w.backend(t), Nodes: append([]string(nil), w.nodes...), Faults: &faults{w: w}, EtcdVersion: version}
}

// NotApplicable: the kubeadm backend runs every case.
func (harness) NotApplicable() map[etcdtest.Case]string { return nil }

// faults implements etcdtest.Faults on the real environment.
type faults struct{ w *workloadCluster }

func (f *faults) member(node string) (*etcdcluster.Member, error) {
	if m := f.w.etcd.MemberOnNode(node); m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("no etcd member on Node %s", node)
}

func (f *faults) KillMember(_ context.Context, node string) error {
	m, err := f.member(node)
	if err != nil {
		return err
	}
	return m.Kill()
}

func (f *faults) RestartMember(ctx context.Context, node string) error {
	m, err := f.member(node)
	if err != nil {
		return err
	}
	return m.Restart(ctx)
}

func (f *faults) RaiseNoSpace(ctx context.Context, node string) error {
	m, err := f.member(node)
	if err != nil {
		return err
	}
	return f.w.etcd.RaiseNoSpace(ctx, m.Name())
}

func (f *faults) AddLearner(ctx context.Context, node string) error {
	m, err := f.w.etcd.AddLearner(ctx, etcdcluster.MemberSpec{NodeName: node})
	if err != nil {
		return err
	}
	return f.w.AddNode(ctx, m)
}

func (f *faults) AddNeverStarted(ctx context.Context) (uint64, error) {
	id, _, err := f.w.etcd.AddGhostLearner(ctx)
	return id, err
}

func (f *faults) SplitBrain(ctx context.Context, node string) error {
	sep, err := f.w.etcd.StartSeparate(ctx, node)
	if err != nil {
		return err
	}
	k := f.w.kubelet(node)
	if k == nil {
		return fmt.Errorf("no kubelet on Node %s", node)
	}
	k.Retarget(kubelet.EtcdPort, sep.Members()[0].ClientAddress())
	return nil
}

func (f *faults) BreakCA(ctx context.Context) error {
	other, err := pki.NewCA()
	if err != nil {
		return err
	}
	s := &corev1.Secret{}
	if err := mgmt.Client.Get(ctx, f.caKey(), s); err != nil {
		return err
	}
	s.Data["tls.crt"], s.Data["tls.key"] = other.CertPEM(), other.KeyPEM()
	return mgmt.Client.Update(ctx, s)
}

func (f *faults) DeleteCA(ctx context.Context) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.caKey().Namespace, Name: f.caKey().Name}}
	return mgmt.Client.Delete(ctx, s)
}

func (f *faults) caKey() client.ObjectKey {
	return client.ObjectKey{Namespace: f.w.key.Namespace, Name: f.w.key.Name + "-etcd"}
}

func (f *faults) StopAPIServer(context.Context) error {
	if f.w.apiServer == workload {
		return errors.New("refusing to stop the shared workload apiserver: ask for an isolated cluster")
	}
	return f.w.apiServer.StopServing()
}

// LeaderNode asks the running members' raft state which member leads.
func (f *faults) LeaderNode(context.Context) (string, error) {
	leader, err := f.w.etcd.Leader()
	if err != nil {
		return "", err
	}
	return leader.NodeName(), nil
}

// HasMember lists members through a running member, other than node's when there is one (a
// removed member may still run and answer with its stale view).
func (f *faults) HasMember(ctx context.Context, node string) (bool, error) {
	var errs []error
	members := f.w.etcd.Members()
	slices.SortStableFunc(members, func(a, b *etcdcluster.Member) int {
		return cmp.Compare(boolInt(a.NodeName() == node), boolInt(b.NodeName() == node))
	})
	for _, m := range members {
		if !m.Running() {
			continue
		}
		found, err := memberListHas(ctx, m, node)
		if err == nil {
			return found, nil
		}
		errs = append(errs, err)
	}
	return false, fmt.Errorf("no running member answered: %w", errors.Join(errs...))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func memberListHas(ctx context.Context, m *etcdcluster.Member, node string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	members, err := m.MemberList(ctx)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(members, func(mm *etcdserverpb.Member) bool { return mm.Name == node }), nil
}

// AddDuplicateName leaves a member named like node's that was never removed, with another peer
// URL, that does not run (a reused hostname); node's member keeps running.
func (f *faults) AddDuplicateName(ctx context.Context, node string) error {
	_, err := f.w.etcd.AddDuplicate(ctx, node)
	return err
}

// HideMember deletes node's etcd Pod from the workload apiserver (its mirror Pod, as when a
// kubelet stops reporting it); the member keeps running, but nothing reaches it.
func (f *faults) HideMember(ctx context.Context, node string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: kubelet.EtcdPodName(node)}}
	return f.w.APIServer.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))
}

// HasMemberID asks the running voters for a linearizable member list.
func (f *faults) HasMemberID(ctx context.Context, id uint64) (bool, error) {
	members, err := f.memberList(ctx)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(members, func(m *etcdserverpb.Member) bool { return m.ID == id }), nil
}

// MemberCount asks the running voters for a linearizable member list.
func (f *faults) MemberCount(ctx context.Context) (int, error) {
	members, err := f.memberList(ctx)
	if err != nil {
		return 0, err
	}
	return len(members), nil
}

func (f *faults) memberList(ctx context.Context) ([]*etcdserverpb.Member, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return f.w.etcd.MemberList(ctx)
}
