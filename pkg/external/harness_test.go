package external

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
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
	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
)

const startTimeout = 2 * time.Minute

var clusterSeq atomic.Int32

// network stands between the backend and the members: it dials the real members and can cut a
// member off (its open connections closed, new ones refused) or send its address to another
// etcd, as a partition or a misrouted load balancer would.
type network struct {
	mu       sync.Mutex
	blocked  map[string]bool
	retarget map[string]string
	open     map[string][]net.Conn
}

func newNetwork() *network {
	return &network{blocked: map[string]bool{}, retarget: map[string]string{}, open: map[string][]net.Conn{}}
}

func (n *network) dial(ctx context.Context, addr string) (net.Conn, error) {
	n.mu.Lock()
	to, blocked := addr, n.blocked[addr]
	if t, ok := n.retarget[addr]; ok {
		to = t
	}
	n.mu.Unlock()
	if blocked {
		return nil, fmt.Errorf("dial tcp %s: connect: connection refused", addr)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", to)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.open[addr] = append(n.open[addr], c)
	n.mu.Unlock()
	return c, nil
}

// cut closes the open connections to addr; block keeps it cut.
func (n *network) cut(addr string, block bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if block {
		n.blocked[addr] = true
	}
	for _, c := range n.open[addr] {
		_ = c.Close()
	}
	delete(n.open, addr)
}

func (n *network) send(addr, to string) {
	n.mu.Lock()
	n.retarget[addr] = to
	n.mu.Unlock()
	n.cut(addr, false)
}

// externalCluster is one real TLS etcd cluster outside any workload cluster, with its Secrets
// in the management apiserver as Cluster API names them.
type externalCluster struct {
	etcd   *etcdcluster.Cluster
	net    *network
	mgmt   *env.APIServer
	key    client.ObjectKey
	nodes  []string
	client pki.KeyPair
}

// startExternal starts n members; mutate may change their specs before they start.
func startExternal(t testing.TB, apiServer *env.APIServer, n int, mutate ...func([]etcdcluster.MemberSpec)) *externalCluster {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	name := fmt.Sprintf("ext%d", clusterSeq.Add(1))
	specs := etcdcluster.Nodes(name, n)
	for _, m := range mutate {
		m(specs)
	}
	c, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: specs})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Close() })
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "external-"}}
	g.Expect(apiServer.Client.Create(ctx, ns)).To(Succeed())
	e := &externalCluster{etcd: c, net: newNetwork(), mgmt: apiServer, key: client.ObjectKey{Namespace: ns.Name, Name: name}, client: c.ClientKeyPair()}
	for _, m := range c.Members() {
		e.nodes = append(e.nodes, m.NodeName())
	}
	g.Expect(e.writeSecrets(ctx, c.CA().CertPEM(), e.client)).To(Succeed())
	return e
}

// writeSecrets creates the CA Secret (tls.crt only: an external etcd's CA key stays with its
// owner) and the apiserver's client certificate Secret.
func (e *externalCluster) writeSecrets(ctx context.Context, caPEM []byte, kp pki.KeyPair) error {
	for name, data := range map[string]map[string][]byte{
		CASecretName(e.key.Name):     {"tls.crt": caPEM},
		ClientSecretName(e.key.Name): {"tls.crt": kp.Cert, "tls.key": kp.Key},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.key.Namespace, Name: name}}
		err := e.mgmt.Client.Get(ctx, client.ObjectKeyFromObject(s), s)
		switch {
		case err == nil:
			s.Data = data
			err = e.mgmt.Client.Update(ctx, s)
		case client.IgnoreNotFound(err) == nil:
			s.Data = data
			err = e.mgmt.Client.Create(ctx, s)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (e *externalCluster) endpoints() []string {
	var out []string
	for _, m := range e.etcd.Members() {
		out = append(out, m.ClientURL())
	}
	return out
}

func (e *externalCluster) backend(t testing.TB, mutate ...func(*Config)) *Backend {
	t.Helper()
	cfg := Config{Cluster: e.key, Endpoints: e.endpoints(), Client: e.mgmt.Client, DialContext: e.net.dial, CallTimeout: 3 * time.Second}
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := New(cfg)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// harness runs the conformance suite on the external backend.
type harness struct{}

var _ etcdtest.Harness = harness{}

func (harness) Start(t *testing.T, spec etcdtest.Spec) *etcdtest.Env {
	t.Helper()
	apiServer := mgmt
	if spec.Isolated {
		s, err := env.StartAPIServer(env.APIServerOptions{})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = s.Stop() })
		apiServer = s
	}
	e := startExternal(t, apiServer, spec.Members)
	// Every member of the test etcd, the learners the cases add included, listens on
	// etcdcluster.DefaultIP: that is the address of every etcd Machine, as the registry passes an
	// etcdadm Cluster's etcd Machine addresses, so members joined later are asked too.
	b := e.backend(t, func(c *Config) { c.MachineHosts = []string{etcdcluster.DefaultIP} })
	version, err := e.etcd.Version(t.Context())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return &etcdtest.Env{Cluster: b, Nodes: slices.Clone(e.nodes), Faults: &faults{e: e}, EtcdVersion: version}
}

// NotApplicable: the external backend runs every case.
func (harness) NotApplicable() map[etcdtest.Case]string { return nil }

// faults implements etcdtest.Faults on the real environment. The external backend reaches etcd
// with no workload apiserver in between: StopAPIServer stops the management apiserver that
// holds the Secrets, the only apiserver the backend uses.
type faults struct{ e *externalCluster }

func (f *faults) member(node string) (*etcdcluster.Member, error) {
	if m := f.e.etcd.MemberOnNode(node); m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("no etcd member on %s", node)
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
	return f.e.etcd.RaiseNoSpace(ctx, m.Name())
}

func (f *faults) AddLearner(ctx context.Context, node string) error {
	_, err := f.e.etcd.AddLearner(ctx, etcdcluster.MemberSpec{NodeName: node})
	return err
}

func (f *faults) AddNeverStarted(ctx context.Context) (uint64, error) {
	id, _, err := f.e.etcd.AddGhostLearner(ctx)
	return id, err
}

// SplitBrain sends the address of node's member to a separate single-member cluster.
func (f *faults) SplitBrain(ctx context.Context, node string) error {
	m, err := f.member(node)
	if err != nil {
		return err
	}
	sep, err := f.e.etcd.StartSeparate(ctx, node)
	if err != nil {
		return err
	}
	f.e.net.send(m.ClientAddress(), sep.Members()[0].ClientAddress())
	return nil
}

func (f *faults) BreakCA(ctx context.Context) error {
	other, err := pki.NewCA()
	if err != nil {
		return err
	}
	return f.e.writeSecrets(ctx, other.CertPEM(), f.e.client)
}

func (f *faults) DeleteCA(ctx context.Context) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.e.key.Namespace, Name: CASecretName(f.e.key.Name)}}
	return f.e.mgmt.Client.Delete(ctx, s)
}

func (f *faults) StopAPIServer(context.Context) error {
	if f.e.mgmt == mgmt {
		return errors.New("refusing to stop the shared management apiserver: ask for an isolated cluster")
	}
	return f.e.mgmt.StopServing()
}

func (f *faults) AddDuplicateName(ctx context.Context, node string) error {
	_, err := f.e.etcd.AddDuplicate(ctx, node)
	return err
}

// HideMember cuts node's member off the backend's network; the member keeps running.
func (f *faults) HideMember(_ context.Context, node string) error {
	m, err := f.member(node)
	if err != nil {
		return err
	}
	f.e.net.cut(m.ClientAddress(), true)
	return nil
}

func (f *faults) LeaderNode(context.Context) (string, error) {
	leader, err := f.e.etcd.Leader()
	if err != nil {
		return "", err
	}
	return leader.NodeName(), nil
}

func (f *faults) HasMember(ctx context.Context, node string) (bool, error) {
	var errs []error
	for _, m := range f.e.etcd.Members() {
		if !m.Running() || m.NodeName() == node {
			continue
		}
		found, err := memberListHas(ctx, m, node)
		if err == nil {
			return found, nil
		}
		errs = append(errs, err)
	}
	if m := f.e.etcd.MemberOnNode(node); m != nil && m.Running() {
		return memberListHas(ctx, m, node)
	}
	return false, fmt.Errorf("no running member answered: %w", errors.Join(errs...))
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

func (f *faults) HasMemberID(ctx context.Context, id uint64) (bool, error) {
	members, err := f.memberList(ctx)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(members, func(m *etcdserverpb.Member) bool { return m.ID == id }), nil
}

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
	return f.e.etcd.MemberList(ctx)
}
