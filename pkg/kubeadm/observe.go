package kubeadm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// observation is a snapshot plus the answers it was built from, for MoveLeader and
// RemoveMember to pick a member to send their request through.
type observation struct {
	snap    *etcd.Snapshot
	view    view
	answers map[string]answer
	creds   *credentials
}

// answerOf returns the answer the member with the given ID gave about itself, as a member of
// the observed cluster.
func (o *observation) answerOf(id uint64) (answer, bool) {
	for _, node := range sortedNodes(o.answers) {
		if a := o.answers[node]; id != 0 && a.selfID == id && o.view.ofCluster(a) {
			return a, true
		}
	}
	return answer{}, false
}

// Observe asks the etcd of every etcd Pod in the workload cluster, in parallel, for its status
// and member list, and reports what each said. Members that do not answer are evidence, not
// errors. Observe fails only when no voting member answered: with etcd.ErrUnreachable, or
// etcd.ErrInvalidInput when the CA Secret is unusable or no member's certificate is trusted.
func (b *Backend) Observe(ctx context.Context) (*etcd.Snapshot, error) {
	o, err := b.observe(ctx)
	if err != nil {
		return nil, err
	}
	return o.snap, nil
}

func (b *Backend) observe(ctx context.Context) (*observation, error) {
	log := b.logger(ctx)
	start := time.Now()
	creds, rotated, err := b.certs.get(ctx, start)
	if err != nil {
		return nil, err
	}
	if rotated {
		// Connections authenticated with the previous CA's certificate must not be reused.
		b.pool.dropAll()
	}
	answers, h, err := b.askMembers(ctx, creds)
	if err != nil {
		return nil, err
	}
	known, last := b.memory()
	v := newView(answers, known)
	if v.members == nil && strangerAnswered(answers, v) && last != nil {
		// Only members of another cluster answered: the member list is the last one this
		// cluster's members reported, and the strangers' answers count against them.
		v.members = last
	}
	if v.members == nil {
		return nil, noAnswerError(answers)
	}
	if h.needNodes(v.members) {
		if err := b.listNodes(ctx, &h); err != nil {
			return nil, err
		}
	}
	snap := v.snapshot(h.place(v.members), answers, time.Now())
	b.remember(v, snap, answers)
	log.V(4).Info("Observed etcd", "members", len(snap.Members), "answered", countAnswered(answers), "took", time.Since(start))
	return &observation{snap: snap, view: v, answers: answers, creds: creds}, nil
}

// askMembers lists the etcd Pods and asks every one of them. The members seen last time are
// asked while the Pods are listed, so a warm observation costs the slower of the two, not both.
func (b *Backend) askMembers(ctx context.Context, creds *credentials) (map[string]answer, hosts, error) {
	var (
		wg      sync.WaitGroup
		pods    map[string]bool
		podsErr error
		early   map[string]answer
	)
	wg.Go(func() { pods, podsErr = b.listEtcdPods(ctx) })
	wg.Go(func() { early = b.askAll(ctx, b.knownNodes(), creds) })
	wg.Wait()
	if podsErr != nil {
		return nil, hosts{}, podsErr
	}
	answers := map[string]answer{}
	for node, a := range early {
		// A Node whose etcd Pod is gone is not asked: its answer would be through nothing.
		if pods[node] {
			answers[node] = a
		}
	}
	nodes := slices.Sorted(maps.Keys(pods))
	maps.Copy(answers, b.askAll(ctx, notAsked(nodes, answers), creds))
	return answers, hosts{pods: pods}, nil
}

func (b *Backend) knownNodes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.known)
}

// memory returns the cluster ID this backend saw first and the member list seen last.
func (b *Backend) memory() (uint64, []etcd.Member) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.clusterID, slices.Clone(b.lastMembers)
}

// remember keeps the cluster ID (once), the member list and the Nodes of the members for the
// next observation, and closes connections to Nodes that run no etcd Pod any more.
//
// Note: the cluster ID is remembered for the life of the Backend. A member that answers with
// another one is a stranger (for example a member whose data was wiped and that bootstrapped a
// cluster of its own), even when it is the only one that answers. Restoring etcd from a backup
// creates a new cluster ID; a provider that does so creates a new Backend.
func (b *Backend) remember(v view, s *etcd.Snapshot, answers map[string]answer) {
	keep := map[string]bool{}
	for node := range answers {
		keep[node] = true // every etcd Pod is asked again next time
	}
	var nodes []string
	for _, m := range s.Members {
		if m.NodeName != "" && !keep[m.NodeName] {
			keep[m.NodeName] = true
			nodes = append(nodes, m.NodeName)
		}
	}
	b.mu.Lock()
	if b.clusterID == 0 {
		b.clusterID = v.clusterID
	}
	if v.clusterID == b.clusterID {
		b.lastMembers = slices.Clone(v.members)
	}
	b.known = nodes
	b.mu.Unlock()
	b.pool.retain(keep)
}

// forgetAll closes every connection and forgets the known members, so the next observation
// starts cold (a new port-forward per member). The client certificate and the cluster ID are
// kept.
func (b *Backend) forgetAll() {
	b.mu.Lock()
	b.known = nil
	b.mu.Unlock()
	b.pool.dropAll()
}

// strangerAnswered reports whether a member of another cluster than the view's answered.
func strangerAnswered(answers map[string]answer, v view) bool {
	for _, a := range answers {
		if a.answered() && a.clusterID != 0 && !v.ofCluster(a) {
			return true
		}
	}
	return false
}

func notAsked(nodes []string, answers map[string]answer) []string {
	var out []string
	for _, n := range nodes {
		if _, ok := answers[n]; !ok && n != "" {
			out = append(out, n)
		}
	}
	return out
}

func countAnswered(answers map[string]answer) int {
	n := 0
	for _, a := range answers {
		if a.answered() {
			n++
		}
	}
	return n
}

// noAnswerError explains why nothing could be observed. When every member was refused for its
// certificate (or the CA), retrying does not help: etcd.ErrInvalidInput; when a member answered
// past the bounds, etcd.ErrTooLarge. Otherwise etcd.ErrUnreachable.
func noAnswerError(answers map[string]answer) error {
	if len(answers) == 0 {
		return fmt.Errorf("%w: no etcd member found: no etcd Pod in namespace kube-system", etcd.ErrUnreachable)
	}
	var errs []error
	invalid, tooLarge := true, false
	for _, node := range sortedNodes(answers) {
		a := answers[node]
		switch {
		case a.err != nil:
			errs = append(errs, a.err)
			invalid = invalid && errors.Is(a.err, etcd.ErrInvalidInput)
			tooLarge = tooLarge || errors.Is(a.err, etcd.ErrTooLarge)
		default:
			errs = append(errs, fmt.Errorf("etcd on Node %s answered without a member list: %s", node, strings.Join(a.errors, "; ")))
			invalid = false
		}
	}
	class := etcd.ErrUnreachable
	switch {
	case tooLarge:
		class = etcd.ErrTooLarge
	case invalid:
		class = etcd.ErrInvalidInput
	}
	return fmt.Errorf("%w: no etcd member answered with a member list: %w", class, errors.Join(errs...))
}

func sortedNodes(answers map[string]answer) []string {
	return slices.Sorted(maps.Keys(answers))
}
