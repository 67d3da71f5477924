package soak

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// event is one kind of thing a management cluster sees. applies says whether it can be played
// now; play plays it in the order upstream code would.
type event struct {
	name     string
	backends []string
	applies  func(s *scenario) bool
	play     func(s *scenario, ctx context.Context) error
}

var allBackends = []string{backendKubeadm, backendK3s, backendEtcdadm}

// events are the event kinds, in a fixed order so that a seed picks the same kinds.
var events = []event{
	{name: "join-node-first", backends: []string{backendKubeadm}, applies: canScaleUp, play: func(s *scenario, ctx context.Context) error {
		return s.joinKubeadm(ctx, workload.JoinNodeFirst)
	}},
	{name: "join-etcd-first", backends: []string{backendKubeadm}, applies: canScaleUp, play: func(s *scenario, ctx context.Context) error {
		return s.joinKubeadm(ctx, workload.JoinEtcdFirst)
	}},
	{name: "join-k3s-server", backends: []string{backendK3s}, applies: canScaleUp, play: (*scenario).joinK3s},
	{name: "join-etcdadm-member", backends: []string{backendEtcdadm}, applies: canScaleUp, play: (*scenario).joinEtcdadm},
	{name: "provider-scale-down", backends: allBackends, applies: canScaleDown, play: (*scenario).scaleDown},
	{name: "person-delete", backends: allBackends, applies: hasLive(1), play: func(s *scenario, ctx context.Context) error {
		s.deleteMachine(ctx, s.pick(s.live()), "person")
		return nil
	}},
	{name: "person-delete-concurrent", backends: allBackends, applies: hasLive(2), play: (*scenario).deleteConcurrently},
	{name: "mhc-remediation", backends: []string{backendKubeadm, backendK3s}, applies: canStop, play: (*scenario).breakForMHC},
	{name: "member-stop", backends: allBackends, applies: canStop, play: func(s *scenario, ctx context.Context) error {
		_, err := s.stopMember(ctx)
		return err
	}},
	{name: "member-start", backends: allBackends, applies: hasStopped, play: (*scenario).startMember},
	{name: "node-delete", backends: []string{backendKubeadm, backendK3s}, applies: hasLive(1), play: (*scenario).deleteNode},
	{name: "manager-kill", backends: allBackends, applies: always, play: func(s *scenario, ctx context.Context) error {
		what, err := s.w.killReplica(ctx, false)
		s.logf("  killed %s, started a new replica", what)
		return err
	}},
	{name: "leader-kill", backends: allBackends, applies: always, play: func(s *scenario, ctx context.Context) error {
		what, err := s.w.killReplica(ctx, true)
		s.logf("  killed %s, started a new replica", what)
		return err
	}},
}

func always(*scenario) bool { return true }

func hasLive(n int) func(*scenario) bool {
	return func(s *scenario) bool { return len(s.live()) >= n }
}

// allStarted: every listed member's etcd runs and no learner is in the cluster.
func (s *scenario) allStarted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, stopped := range s.stopped {
		if stopped {
			return false
		}
	}
	return true
}

func canScaleUp(s *scenario) bool { return s.allStarted() && len(s.live()) < 5 }

// canScaleDown is the provider's preflight (KCP scale_down.go preflightChecks): every member
// started, no other Machine deleting.
func canScaleDown(s *scenario) bool {
	if !s.allStarted() || len(s.live()) < 2 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.machines {
		if m.deleted {
			return false
		}
	}
	return true
}

// canStop keeps at most one member stopped, and only where a majority of etcd's voters still
// runs after the stop, so that the soak never loses quorum itself: Machines are no measure of
// that (a failed join leaves a Machine whose learner never started).
func canStop(s *scenario) bool {
	if !s.allStarted() || len(s.live()) < 3 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	list, ok := s.memberList(ctx)
	if !ok {
		return false
	}
	voters, started := startedVoters(list, s.runningIDs())
	return started-1 >= voters/2+1
}

func hasStopped(s *scenario) bool { return !s.allStarted() }

// joinKubeadm plays a control-plane join: Cluster API creates the Machine (with KCP's hook), its
// bootstrap runs `kubeadm join --control-plane` in the given order (test/env/workload JoinOrder
// cites the kubeadm phases).
func (s *scenario) joinKubeadm(ctx context.Context, order workload.JoinOrder) error {
	node := fmt.Sprintf("cp-j%d", s.events)
	if _, err := s.createMachine(ctx, node, kcpHook); err != nil {
		return err
	}
	rec := &machineRec{name: "m-" + node, node: node, providerHook: kcpHook}
	s.addMachine(rec)
	j := s.kubeadm.NewJoin(workload.JoinOptions{Member: etcdcluster.MemberSpec{NodeName: node, IP: s.nextIP()}, Order: order, ProviderID: s.providerID(node)})
	for _, step := range order.Steps() {
		if err := j.RunUntil(ctx, step); err != nil {
			return err
		}
		if step == workload.JoinLearnerAdded {
			s.mu.Lock()
			rec.member = j.Member()
			s.mu.Unlock()
		}
		s.logf("  join %s (%s): %s", node, order, step)
	}
	return s.waitBound(ctx, rec.name)
}

// joinK3s plays a K3s server join: the Machine first, then the server, which K3s joins as a
// learner and promotes.
func (s *scenario) joinK3s(ctx context.Context) error {
	node := fmt.Sprintf("cp-j%d", s.events)
	if _, err := s.createMachine(ctx, node, ""); err != nil {
		return err
	}
	rec := &machineRec{name: "m-" + node, node: node}
	s.addMachine(rec)
	name, err := s.k3s.JoinServer(ctx, node, s.nextIP())
	if err != nil {
		return err
	}
	s.mu.Lock()
	rec.member = s.etcd.Member(name)
	s.mu.Unlock()
	if err := s.setProviderID(ctx, node); err != nil {
		return err
	}
	s.logf("  K3s server %s joined as member %s", node, name)
	return s.waitBound(ctx, rec.name)
}

// joinEtcdadm plays the etcdadm controller's scale-up: `etcdadm join` on a new etcd Machine adds
// the member, and the controller writes the new status.endpoints.
func (s *scenario) joinEtcdadm(ctx context.Context) error {
	m, err := s.etcd.AddLearner(ctx, etcdcluster.MemberSpec{NodeName: fmt.Sprintf("etcd-j%d", s.events), IP: s.nextIP()})
	if err != nil {
		return err
	}
	if err := s.etcd.PromoteMember(ctx, m.Name()); err != nil {
		return err
	}
	if err := s.createEtcdMachine(ctx, m); err != nil {
		return err
	}
	s.logf("  etcdadm member %s joined", m.Name())
	return s.writeEndpoints(ctx)
}

// scaleDown plays the provider's scale-down of one Machine, the oldest (KCP
// scale_down.go selectMachineForInPlaceUpdateOrScaleDown picks the oldest in the largest
// failure domain).
func (s *scenario) scaleDown(ctx context.Context) error {
	rec := s.live()[0]
	switch s.backend {
	case backendEtcdadm:
		// aws/etcdadm-controller controllers/scale.go removeEtcdMemberAndDeleteMachine: the
		// member is removed by its peer URL first, then the Machine is deleted.
		if err := s.removeMember(ctx, rec, "etcdadm controller"); err != nil {
			return err
		}
		s.deleteMachine(ctx, rec, "etcdadm controller")
		return s.writeEndpoints(ctx)
	case backendK3s:
		// cluster-api-k3s puts its bare hook on the Machine just before deleting it; its
		// deletion is then played by providerStep.
		if err := s.annotate(ctx, rec.name, k3sHook, "k3s"); err != nil {
			return err
		}
		s.mu.Lock()
		rec.providerHook = k3sHook
		s.mu.Unlock()
		s.deleteMachine(ctx, rec, "cluster-api-k3s")
	default:
		s.deleteMachine(ctx, rec, "KCP")
	}
	return nil
}

// removeMember removes rec's member from etcd as a provider does: only if listed, by ID.
func (s *scenario) removeMember(ctx context.Context, rec *machineRec, who string) error {
	cli, err := s.etcd.NewClient(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	list, err := cli.MemberList(ctx)
	if err != nil {
		return err
	}
	id := rec.member.ID()
	if !slices.ContainsFunc(list.Members, func(m *pb.Member) bool { return m.ID == id }) {
		return nil
	}
	s.markWorldRemoved(id, who)
	if _, err := cli.MemberRemove(ctx, id); err != nil {
		return fmt.Errorf("%s failed to remove member %x: %w", who, id, err)
	}
	s.logf("  %s removed member %s", who, memberName(rec))
	return nil
}

func (s *scenario) deleteConcurrently(ctx context.Context) error {
	live := s.live()
	s.rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	var wg sync.WaitGroup
	for _, rec := range live[:2] {
		wg.Go(func() { s.deleteMachine(ctx, rec, "person (concurrent)") })
	}
	wg.Wait()
	return nil
}

// stopMember stops the etcd of a random member whose Machine is not deleting.
func (s *scenario) stopMember(ctx context.Context) (*machineRec, error) {
	rec := s.pick(s.live())
	if err := rec.member.Stop(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.stopped[rec.member.Name()] = true
	s.mu.Unlock()
	s.logf("  stopped etcd of member %s", memberName(rec))
	return rec, nil
}

func (s *scenario) startMember(ctx context.Context) error {
	s.mu.Lock()
	var names []string
	for name, stopped := range s.stopped {
		if stopped {
			names = append(names, name)
		}
	}
	s.mu.Unlock()
	slices.Sort(names)
	name := names[s.rng.IntN(len(names))]
	s.mu.Lock()
	delete(s.stopped, name)
	s.mu.Unlock()
	m := s.etcd.Member(name)
	if _, removed := s.listed(ctx, m.ID()); removed {
		s.logf("  member %s was removed while stopped: not started again", name)
		return nil
	}
	if err := m.Restart(ctx); err != nil {
		s.logf("  member %s did not start again: %s", name, firstLine(err.Error()))
		return nil
	}
	s.logf("  started etcd of member %s again", name)
	return s.setNodeCondition(ctx, s.nodeOfMember(name), corev1.ConditionFalse)
}

// listTimeout bounds one member list read: without quorum etcd does not answer a linearizable
// one, and the soak must go on to heal the world.
const listTimeout = 5 * time.Second

// listed reports whether etcd lists the member; removed is true when it answered without it.
// Both are false when etcd did not answer.
func (s *scenario) listed(ctx context.Context, id uint64) (listed, removed bool) {
	list, ok := s.memberList(ctx)
	if !ok {
		return false, false
	}
	if _, ok := list[id]; ok {
		return true, false
	}
	return false, true
}

// memberList reads etcd's member list (linearizable) within listTimeout.
func (s *scenario) memberList(ctx context.Context) (map[uint64]*pb.Member, bool) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	cli, err := s.etcd.NewClient(ctx)
	if err != nil {
		return nil, false
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, false
	}
	out := make(map[uint64]*pb.Member, len(resp.Members))
	for _, m := range resp.Members {
		out[m.ID] = m
	}
	return out, true
}

func (s *scenario) nodeOfMember(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.machines {
		if m.member != nil && m.member.Name() == name {
			return m.node
		}
	}
	return ""
}

// breakForMHC stops a member's etcd and reports it on its Node; the MachineHealthCheck marks the
// Machine and the owner remediates it (providerStep).
func (s *scenario) breakForMHC(ctx context.Context) error {
	rec, err := s.stopMember(ctx)
	if err != nil {
		return err
	}
	return s.setNodeCondition(ctx, rec.node, corev1.ConditionTrue)
}

func (s *scenario) setNodeCondition(ctx context.Context, node string, status corev1.ConditionStatus) error {
	if node == "" || s.wl == nil || s.backend == backendEtcdadm {
		return nil
	}
	n := &corev1.Node{}
	if err := s.wl.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return client.IgnoreNotFound(err)
	}
	before := n.DeepCopy()
	cond := corev1.NodeCondition{Type: unhealthyCondition, Status: status, Reason: "Soak", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
	i := slices.IndexFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == unhealthyCondition })
	if i < 0 {
		n.Status.Conditions = append(n.Status.Conditions, cond)
	} else {
		n.Status.Conditions[i] = cond
	}
	return client.IgnoreNotFound(s.wl.Client.Status().Patch(ctx, n, client.MergeFrom(before)))
}

// deleteNode deletes the Node object of a live Machine (a person, or a cloud controller). K3s
// then removes the Node's member itself (its finalizer), which the soak does not hold against
// etcd-adapter.
func (s *scenario) deleteNode(ctx context.Context) error {
	rec := s.pick(s.live())
	if s.backend == backendK3s {
		s.markWorldRemoved(rec.member.ID(), "K3s, for the deleted Node "+rec.node)
	}
	err := s.wl.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: rec.node}})
	s.logf("  deleted Node %s (%v)", rec.node, err)
	return client.IgnoreNotFound(err)
}

func (s *scenario) annotate(ctx context.Context, machine, key, value string) error {
	return s.patchMachine(ctx, machine, func(ann map[string]string) { ann[key] = value })
}
