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
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
)

// observe asks the etcd of every etcd Pod in the workload cluster, in parallel, for its status
// and member list (membership.Cluster.Observer): for Observe, and right before MoveLeader and
// RemoveMember; the observation reaches members with the credentials it was made with. It
// fails only when no voting member answered: with etcd.ErrUnreachable, or
// etcd.ErrInvalidInput when the CA Secret is unusable, no member's certificate is trusted, or
// the members answer for two clusters in equal numbers.
func (b *Backend) observe(ctx context.Context) (*membership.Observation, error) {
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
	answers, facts, err := b.askMembers(ctx, creds)
	if err != nil {
		return nil, err
	}
	v, err := decide(&b.Memory, answers)
	if err != nil {
		return nil, err
	}
	if facts.needNodes(v.Members) {
		if err := b.listNodes(ctx, &facts); err != nil {
			return nil, err
		}
	}
	snap := snapshot(v, facts.assignNodes(v.Members), answers, time.Now())
	b.remember(snap, answers)
	log.V(4).Info("Observed etcd", "members", len(snap.Members), "answered", countAnswered(answers), "took", time.Since(start))
	return &membership.Observation{Snap: snap, Decision: v, Answers: answers, Transport: reach{b: b, creds: creds}}, nil
}

// decide decides the cluster from the answers (membership.Memory.Decide) and says
// why there is none.
func decide(mem *membership.Memory, answers []membership.Answer) (membership.Decision, error) {
	v, err := mem.Decide(answers)
	if errors.Is(err, membership.ErrNoMemberList) {
		return v, noAnswerError(answers)
	}
	return v, err
}

// askMembers lists the etcd Pods and asks every one of them. The members seen last time are
// asked while the Pods are listed, so a warm observation costs the slower of the two, not both.
func (b *Backend) askMembers(ctx context.Context, creds *credentials) ([]membership.Answer, nodeFacts, error) {
	var (
		wg      sync.WaitGroup
		pods    map[string]bool
		podsErr error
		early   []membership.Answer
	)
	wg.Go(func() { pods, podsErr = b.listEtcdPods(ctx) })
	wg.Go(func() { early = b.askAll(ctx, b.knownNodes(), creds) })
	wg.Wait()
	if podsErr != nil {
		return nil, nodeFacts{}, podsErr
	}
	// A Node whose etcd Pod is gone is not asked: its answer would be through nothing.
	answers := slices.DeleteFunc(early, func(a membership.Answer) bool { return !pods[a.Where] })
	nodes := slices.Sorted(maps.Keys(pods))
	answers = append(answers, b.askAll(ctx, notAsked(nodes, answers), creds)...)
	slices.SortFunc(answers, func(x, y membership.Answer) int { return strings.Compare(x.Where, y.Where) })
	return answers, nodeFacts{pods: pods}, nil
}

func (b *Backend) knownNodes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.known)
}

// remember keeps the Nodes of the members for the next observation, and closes connections to
// Nodes that run no etcd Pod any more. (The cluster ID and the member list are kept by the Memory.)
func (b *Backend) remember(s *etcd.Snapshot, answers []membership.Answer) {
	keep := map[string]bool{}
	for _, a := range answers {
		keep[a.Where] = true // every etcd Pod is asked again next time
	}
	var nodes []string
	for _, m := range s.Members {
		if m.NodeName != "" && !keep[m.NodeName] {
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
// starts cold (a new port-forward per member). The client certificate and the cluster ID are
// kept.
func (b *Backend) forgetAll() {
	b.mu.Lock()
	b.known = nil
	b.mu.Unlock()
	b.pool.dropAll()
}

func notAsked(nodes []string, answers []membership.Answer) []string {
	var out []string
	for _, n := range nodes {
		if n != "" && !slices.ContainsFunc(answers, func(a membership.Answer) bool { return a.Where == n }) {
			out = append(out, n)
		}
	}
	return out
}

func countAnswered(answers []membership.Answer) int {
	n := 0
	for _, a := range answers {
		if a.Answered() {
			n++
		}
	}
	return n
}

// noAnswerError explains why nothing could be observed. When every member was refused for its
// certificate (or the CA), retrying does not help: etcd.ErrInvalidInput; when a member answered
// past the bounds, etcd.ErrTooLarge. Otherwise etcd.ErrUnreachable.
func noAnswerError(answers []membership.Answer) error {
	if len(answers) == 0 {
		return fmt.Errorf("%w: no etcd member found: no etcd Pod in namespace kube-system", etcd.ErrUnreachable)
	}
	var errs []error
	invalid, tooLarge := true, false
	for _, a := range answers {
		switch {
		case a.Err != nil:
			errs = append(errs, a.Err)
			invalid = invalid && errors.Is(a.Err, etcd.ErrInvalidInput)
			tooLarge = tooLarge || errors.Is(a.Err, etcd.ErrTooLarge)
		default:
			errs = append(errs, fmt.Errorf("etcd on Node %s answered without a member list: %s", a.Where, strings.Join(a.Errors, "; ")))
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
