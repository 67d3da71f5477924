package kcp

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	kcpenv "github.com/etcd-adapter/etcd-adapter/test/env/kcp"
)

// joinPoll is how often joinWatch reads etcd's member list and the ControlPlaneEtcd.
const joinPoll = 200 * time.Millisecond

// memberTrace is what etcd's member list showed of one member, by its ID.
type memberTrace struct {
	peerURLs []string
	// firstSeen is when etcd first listed it.
	firstSeen time.Time
	// notStarted: etcd listed it with no name (its etcd had not started).
	notStarted bool
	// namedAt is when etcd first listed it with its name (its etcd started); zero before.
	namedAt time.Time
	// voter: etcd listed it as a voter (promoted, or never a learner).
	voter bool
	// goneAt is when etcd stopped listing it; zero while listed.
	goneAt time.Time
}

// joinWatch reads, in the background, etcd's member list (through the running voters: what
// etcd itself says, whoever changed it) and the ControlPlaneEtcd's Progressing condition, so
// that a join can be judged on everything both showed while it was under way.
type joinWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	members map[uint64]*memberTrace
	// waiting are the messages of Progressing with reason WaitingForMemberJoin, as seen.
	waiting []string
}

func startJoinWatch(ctx context.Context, o *observer) *joinWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &joinWatch{cancel: cancel, done: make(chan struct{}), members: map[uint64]*memberTrace{}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(joinPoll)
		defer tick.Stop()
		for {
			w.poll(ctx, o)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// poll reads both sides once; a read that fails is skipped (the next one comes soon).
func (w *joinWatch) poll(ctx context.Context, o *observer) {
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if list, err := o.e.MemberList(callCtx); err == nil {
		w.observeMembers(list, time.Now())
	}
	cpe, err := o.controlPlaneEtcd(callCtx)
	if err != nil || cpe == nil {
		return
	}
	if c := meta.FindStatusCondition(cpe.Status.Conditions, v1alpha1.ProgressingCondition); c != nil && c.Reason == v1alpha1.ProgressingWaitingForJoinReason {
		w.mu.Lock()
		if !slices.Contains(w.waiting, c.Message) {
			w.waiting = append(w.waiting, c.Message)
		}
		w.mu.Unlock()
	}
}

func (w *joinWatch) observeMembers(list *clientv3.MemberListResponse, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	listed := map[uint64]bool{}
	for _, m := range list.Members {
		listed[m.ID] = true
		t := w.members[m.ID]
		if t == nil {
			t = &memberTrace{peerURLs: m.PeerURLs, firstSeen: at}
			w.members[m.ID] = t
		}
		t.notStarted = t.notStarted || m.Name == ""
		if m.Name != "" && t.namedAt.IsZero() {
			t.namedAt = at
		}
		t.voter = t.voter || !m.IsLearner
	}
	for id, t := range w.members {
		if !listed[id] && t.goneAt.IsZero() {
			t.goneAt = at
		}
	}
}

// trace returns a copy of what etcd showed of the member; false when it was never seen.
func (w *joinWatch) trace(id uint64) (memberTrace, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.members[id]
	if !ok {
		return memberTrace{}, false
	}
	return *t, true
}

// waitedFor reports whether Progressing said WaitingForMemberJoin for the Machine's member.
func (w *joinWatch) waitedFor(machine string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.waiting, func(msg string) bool { return strings.Contains(msg, "of Machine "+machine+" ") })
}

func (w *joinWatch) stop() {
	w.cancel()
	<-w.done
}

// expectJoinsFromEtcd asserts, from etcd itself, that each Machine's join went as kubeadm's
// Node-first join goes and that etcd-adapter left it alone: etcd listed the Machine's learner
// not started, with its peer URL on the address of the Machine's Node alone (so that
// etcd-adapter places it on that Node); no MemberRemove removed it and etcd never stopped
// listing it; it became a voter. The ControlPlaneEtcd's Progressing said WaitingForMemberJoin
// for the Machine meanwhile.
func expectJoinsFromEtcd(ctx context.Context, g Gomega, e *kcpenv.Env, w *joinWatch, machines []string) {
	ips := nodeIPs(ctx, g, e)
	for _, machine := range machines {
		m := e.Etcd().MemberOnNode(machine)
		g.Expect(m).NotTo(BeNil(), "etcd member of Machine %s", machine)
		id := m.ID()
		g.Eventually(func(g Gomega) {
			t, ok := w.trace(id)
			g.Expect(ok).To(BeTrue())
			g.Expect(t.voter).To(BeTrue(), "etcd must list the learner of Machine %s as a voter once kubeadm promoted it", machine)
		}).WithTimeout(time.Minute).WithPolling(joinPoll).Should(Succeed())
		t, _ := w.trace(id)
		g.Expect(t.notStarted).To(BeTrue(), "etcd must have listed the learner %x of Machine %s before its etcd started", id, machine)
		g.Expect(t.goneAt.IsZero()).To(BeTrue(), "etcd stopped listing the learner %x of Machine %s at %s", id, machine, t.goneAt.Format(time.StampMilli))
		for _, call := range e.Etcd().MemberRemoveCalls() {
			g.Expect(call.ID == id && call.Removed).To(BeFalse(), "a MemberRemove removed the learner %x of Machine %s", id, machine)
		}
		g.Expect(t.peerURLs).To(HaveLen(1))
		u, err := url.Parse(t.peerURLs[0])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ips[u.Hostname()]).To(Equal([]string{machine}), "the learner's peer URL %s must be on the address of Node %s alone", u, machine)
		g.Expect(w.waitedFor(machine)).To(BeTrue(), "Progressing must have said %s for Machine %s; it said %v",
			v1alpha1.ProgressingWaitingForJoinReason, machine, w.waiting)
		fmt.Printf("learner %x of Machine %s: listed not started on %s for %v, never removed, promoted; Progressing said %s\n",
			id, machine, u.Host, t.namedAt.Sub(t.firstSeen).Round(time.Millisecond), v1alpha1.ProgressingWaitingForJoinReason)
	}
}

// nodeIPs returns the Nodes of the workload cluster by InternalIP.
func nodeIPs(ctx context.Context, g Gomega, e *kcpenv.Env) map[string][]string {
	nodes := &corev1.NodeList{}
	g.Expect(e.WorkloadClient().List(ctx, nodes, client.MatchingLabels{})).To(Succeed())
	out := map[string][]string{}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				out[a.Address] = append(out[a.Address], n.Name)
			}
		}
	}
	return out
}

// expectJoinsRunning stops an Eventually at once when a Machine's Node-first join failed after
// kubelet-start (e.g. its learner was removed before its etcd started), saying how long etcd
// listed the learner.
func expectJoinsRunning(e *kcpenv.Env, w *joinWatch, machines []string) {
	for _, machine := range machines {
		err := e.JoinError(machine)
		if err == nil {
			continue
		}
		msg := fmt.Sprintf("the join of Machine %s failed", machine)
		if m := e.Etcd().MemberOnNode(machine); m != nil {
			if t, ok := w.trace(m.ID()); ok && !t.goneAt.IsZero() {
				msg += fmt.Sprintf(": etcd stopped listing its learner %x %v after it first listed it (not started: %t)",
					m.ID(), t.goneAt.Sub(t.firstSeen).Round(time.Millisecond), t.notStarted)
			}
		}
		StopTrying(msg).Wrap(err).Now()
	}
}
