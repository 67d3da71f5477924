package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// Backends the soak plays.
const (
	backendKubeadm = "kubeadm"
	backendK3s     = "k3s"
	backendEtcdadm = "etcdadm"
)

// machineRec is what the soak knows of one etcd-hosting Machine: its Node and its member.
type machineRec struct {
	name, node, ip string
	member         *etcdcluster.Member
	// deleted: the soak sent the Machine's deletion (a person, a provider, a remediation).
	deleted bool
	// providerHook is the provider's own pre-terminate hook key on the Machine, if any.
	providerHook string
}

// scenario is one workload cluster of a backend, the events played on it, and what was seen.
type scenario struct {
	index   int
	backend string
	rng     *rand.Rand
	w       *world
	c       client.Client
	logf    func(format string, args ...any)

	ns      string
	cluster *clusterv1.Cluster
	etcd    *etcdcluster.Cluster
	// wl is the workload apiserver; kubeadm, k3s and external are the workload cluster of the
	// kubeadm, k3s and etcdadm backends, ec the EtcdadmCluster of the etcdadm backend.
	wl       *env.APIServer
	kubeadm  *workload.Kubeadm
	k3s      *workload.K3s
	external *workload.External
	ec       *unstructured.Unstructured

	mu       sync.Mutex
	machines []*machineRec
	// worldRemoved are the members the soak itself removed, or whose removal it caused outside
	// etcd-adapter (K3s removes the member of a deleted Node), with who did it.
	worldRemoved map[uint64]string
	// ips counts the addresses given to members.
	ips int
	// stopped are members whose etcd the soak stopped.
	stopped map[string]bool

	events     int
	violations []string
	waits      []string
}

func (s *scenario) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.violations = append(s.violations, msg)
	s.mu.Unlock()
	s.logf("VIOLATION [%s #%d] %s", s.backend, s.index, msg)
}

// nextIP is a loopback address of its own for a member, so that a member can be placed on its
// Machine or Node by its peer URL.
func (s *scenario) nextIP() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ips++
	return fmt.Sprintf("127.%d.%d.%d", 10+map[string]int{backendKubeadm: 0, backendK3s: 1, backendEtcdadm: 2}[s.backend], s.index%250, s.ips)
}

// live returns the Machines the soak did not delete whose member it knows.
func (s *scenario) live() []*machineRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*machineRec
	for _, m := range s.machines {
		if !m.deleted && m.member != nil {
			out = append(out, m)
		}
	}
	return out
}

func (s *scenario) pick(ms []*machineRec) *machineRec {
	if len(ms) == 0 {
		return nil
	}
	return ms[s.rng.IntN(len(ms))]
}

func (s *scenario) addMachine(m *machineRec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.machines = append(s.machines, m)
}

// machineOf returns the record whose member has the ID.
func (s *scenario) machineOf(id uint64) *machineRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.machines {
		if m.member != nil && m.member.ID() == id {
			return m
		}
	}
	return nil
}

func (s *scenario) markWorldRemoved(id uint64, who string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.worldRemoved[id] = who
}

func (s *scenario) worldRemovedBy(id uint64) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	who, ok := s.worldRemoved[id]
	return who, ok
}

// createMachine creates the control-plane Machine of a Node before the Node joins, as Cluster
// API creates a Machine before its bootstrap runs, with the provider's hook when it has one.
func (s *scenario) createMachine(ctx context.Context, node, providerHook string) (*clusterv1.Machine, error) {
	var ann map[string]string
	if providerHook != "" {
		ann = map[string]string{providerHook: ""}
	}
	return env.CreateControlPlaneMachine(ctx, s.c, env.MachineInput{Cluster: s.cluster, Name: "m-" + node,
		ProviderID: s.providerID(node), Annotations: ann})
}

func (s *scenario) providerID(node string) string { return fmt.Sprintf("test://%s/%s", s.ns, node) }

// setProviderID gives a Node its providerID, as the cloud provider or kubelet flag does.
func (s *scenario) setProviderID(ctx context.Context, node string) error {
	n := &corev1.Node{}
	if err := s.wl.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return fmt.Errorf("failed to get Node %s: %w", node, err)
	}
	before := n.DeepCopy()
	n.Spec.ProviderID = s.providerID(node)
	return s.wl.Client.Patch(ctx, n, client.MergeFrom(before))
}

// deleteMachine deletes the Machine; the quorum guard may refuse it, which is an outcome.
func (s *scenario) deleteMachine(ctx context.Context, m *machineRec, who string) {
	err := s.c.Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: m.name}})
	if err != nil {
		s.logf("  %s: deleting Machine %s refused or failed: %s", who, m.name, firstLine(err.Error()))
		return
	}
	s.mu.Lock()
	m.deleted = true
	s.mu.Unlock()
	s.logf("  %s: deleted Machine %s (member %s)", who, m.name, memberName(m))
}

func memberName(m *machineRec) string {
	if m.member == nil {
		return "-"
	}
	return fmt.Sprintf("%s/%x", m.member.Name(), m.member.ID())
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 240 {
		s = s[:240] + "..."
	}
	return s
}

// pause waits a seeded random time between events, so that events land at varied points of
// etcd-adapter's passes.
func (s *scenario) pause(ctx context.Context) {
	d := time.Duration(500+s.rng.IntN(6000)) * time.Millisecond
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
