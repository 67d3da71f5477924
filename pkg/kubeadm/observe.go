package kubeadm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// Observe asks every member, in parallel, for its status, member list and alarms, and reports
// what each said. Members that do not answer are evidence, not errors. Observe fails only when
// no voting member answered: with etcd.ErrUnreachable, or etcd.ErrInvalidInput when the CA
// Secret is unusable or no member's certificate is trusted.
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
	answers, err := b.askMembers(ctx, creds)
	if err != nil {
		return nil, err
	}
	v := newView(answers)
	if v.members == nil {
		return nil, noAnswerError(answers)
	}
	snap := v.snapshot(answers, time.Now())
	b.remember(snap)
	log.V(4).Info("Observed etcd", "members", len(snap.Members), "answered", countAnswered(answers), "took", time.Since(start))
	return &observation{snap: snap, view: v, answers: answers, creds: creds}, nil
}

// askMembers asks the members seen last time; then any member they report that was not asked;
// and when none answered, the etcd Pods the apiserver knows.
func (b *Backend) askMembers(ctx context.Context, creds *credentials) (map[string]answer, error) {
	answers := b.askAll(ctx, b.knownNodes(), creds)
	if countAnswered(answers) == 0 {
		nodes, err := b.discover(ctx)
		if err != nil {
			return nil, err
		}
		merge(answers, b.askAll(ctx, notAsked(nodes, answers), creds))
	}
	if missing := notAsked(newView(answers).nodes(), answers); len(missing) > 0 {
		merge(answers, b.askAll(ctx, missing, creds))
	}
	return answers, nil
}

func (b *Backend) knownNodes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.known)
}

// remember keeps the Nodes of the snapshot's members for the next observation, and closes
// connections to Nodes that host no member any more.
func (b *Backend) remember(s *etcd.Snapshot) {
	keep := map[string]bool{}
	var nodes []string
	for _, m := range s.Members {
		if m.NodeName != "" {
			keep[m.NodeName] = true
			nodes = append(nodes, m.NodeName)
		}
	}
	b.mu.Lock()
	b.known = nodes
	b.mu.Unlock()
	b.pool.retain(keep)
}

// forgetAll closes every connection and forgets the known members, so the next observation
// starts cold (Pod discovery, a new port-forward per member). The client certificate is kept.
func (b *Backend) forgetAll() {
	b.mu.Lock()
	b.known = nil
	b.mu.Unlock()
	b.pool.dropAll()
}

func merge(into, from map[string]answer) {
	for k, v := range from {
		into[k] = v
	}
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
// certificate (or the CA), retrying does not help: etcd.ErrInvalidInput. Otherwise
// etcd.ErrUnreachable.
func noAnswerError(answers map[string]answer) error {
	if len(answers) == 0 {
		return fmt.Errorf("%w: no etcd member found: no etcd Pod in namespace kube-system", etcd.ErrUnreachable)
	}
	var errs []error
	invalid := true
	for _, node := range sortedNodes(answers) {
		a := answers[node]
		switch {
		case a.err != nil:
			errs = append(errs, a.err)
			invalid = invalid && errors.Is(a.err, etcd.ErrInvalidInput)
		default:
			errs = append(errs, fmt.Errorf("etcd on Node %s answered without a member list: %s", node, strings.Join(a.errors, "; ")))
			invalid = false
		}
	}
	class := etcd.ErrUnreachable
	if invalid {
		class = etcd.ErrInvalidInput
	}
	return fmt.Errorf("%w: no etcd member answered with a member list: %w", class, errors.Join(errs...))
}

func sortedNodes(answers map[string]answer) []string {
	nodes := make([]string, 0, len(answers))
	for n := range answers {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	return nodes
}
