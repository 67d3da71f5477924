package external

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
)

// observe asks every configured endpoint, and the client URLs the members report that may be
// dialled (endpoints), in parallel, for its status, member list and alarms
// (membership.Cluster.Observer): for Observe, and right before MoveLeader and RemoveMember;
// the observation reaches members with the credentials it was made with. An endpoint answering for another cluster is evidence of its own, never merged. It
// fails when no member of the cluster answered: etcd.ErrInvalidInput when every member refused
// the credentials (a wrong CA or a client certificate of another CA), the Secrets are unusable
// or the endpoints answer for two clusters in equal numbers, etcd.ErrUnreachable otherwise.
func (b *Backend) observe(ctx context.Context) (*membership.Observation, error) {
	creds, err := b.loadCredentials(ctx)
	if err != nil {
		return nil, err
	}
	_, last := b.Memory.Recall()
	endpoints := b.endpoints(last)
	if len(endpoints) > maxEndpoints {
		return nil, fmt.Errorf("%w: the etcd members report %d client URLs (at most %d are asked)", etcd.ErrTooLarge, len(endpoints), maxEndpoints)
	}
	answers := membership.AskAll(ctx, endpoints, 0, func(ctx context.Context, ep string) membership.Answer { return b.askEndpoint(ctx, ep, creds) })
	o, err := assemble(&b.Memory, answers, b.dialable, time.Now())
	if err != nil {
		return nil, err
	}
	o.Transport = reach{b: b, creds: creds}
	b.mu.Lock()
	for _, a := range answers {
		if a.Answered() {
			b.selfAt[a.Where] = a.SelfID
		}
	}
	b.mu.Unlock()
	b.retain(b.endpoints(o.Decision.Members))
	b.logger(ctx).V(4).Info("Observed external etcd", "members", len(o.Decision.Members), "endpoints", len(endpoints))
	return o, nil
}

// assemble decides the cluster from the answers (membership.Memory.Decide), says why
// there is none, and builds the snapshot.
func assemble(mem *membership.Memory, answers []membership.Answer, dialable func(string) bool, now time.Time) (*membership.Observation, error) {
	v, err := mem.Decide(answers)
	switch {
	case errors.Is(err, membership.ErrNoMemberList):
		return nil, noAnswerError(answers)
	case err != nil:
		return nil, err
	}
	o := &membership.Observation{Decision: v, Answers: answers}
	o.Snap = snapshot(o, dialable, now)
	return o, nil
}

// maxEndpoints bounds the endpoints asked at once, each with a goroutine and a kept connection:
// two client URLs for each of etcd.MaxMembers members (etcdadm and kubeadm advertise one).
const maxEndpoints = 2 * etcd.MaxMembers

// endpoints are the configured endpoints and the client URLs of the given members that may be
// dialled (dialable: on a configured Machine host), once each. Any other client URL a member
// reports is never asked.
func (b *Backend) endpoints(members []etcd.Member) []string {
	out := slices.Clone(b.configured)
	for _, m := range members {
		for _, u := range m.ClientURLs {
			if b.dialable(u) {
				out = append(out, normalise(u))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// askEndpoint asks the member at one endpoint (membership.AskMember), as a member that may
// have been removed when mayBeRemoved says so: external endpoint lists keep naming a removed
// member until someone edits them.
func (b *Backend) askEndpoint(ctx context.Context, ep string, creds *credentials) membership.Answer {
	cli, err := b.client(ctx, ep, creds)
	if err != nil {
		return membership.Answer{Where: ep, At: time.Now(), Err: err}
	}
	return membership.AskMember(ctx, reach{b: b, creds: creds}, membership.NewClient(cli, cli, ep), ep, membership.Asking{
		Timeout: b.cfg.CallTimeout, MayBeRemoved: b.mayBeRemoved(ep), Gone: b.Memory.Gone,
	})
}

// mayBeRemoved reports whether the member at ep may have been removed: this backend has observed
// nothing yet (another process may have removed it), no member it saw last lists ep as its client
// URL, or this backend asked etcd to remove the member that answered there last.
func (b *Backend) mayBeRemoved(ep string) bool {
	_, last := b.Memory.Recall()
	b.mu.Lock()
	removing := b.removing[b.selfAt[ep]]
	b.mu.Unlock()
	if last == nil || removing {
		return true
	}
	return !slices.ContainsFunc(last, func(m etcd.Member) bool {
		return slices.ContainsFunc(m.ClientURLs, func(u string) bool { return normalise(u) == ep })
	})
}

// noAnswerError says why no member answered: ErrEndpointNotAllowed (an ErrInvalidInput) when
// an endpoint lies outside the allowed networks, ErrInvalidInput when every endpoint refused the
// credentials (retrying will not help), ErrUnreachable otherwise.
func noAnswerError(answers []membership.Answer) error {
	var errs []error
	tlsOnly, tooLarge, notAllowed := len(answers) > 0, false, false
	for _, a := range answers {
		if a.Answered() {
			continue
		}
		errs = append(errs, a.Err)
		tlsOnly = tlsOnly && isTLSFailure(a.Err)
		tooLarge = tooLarge || errors.Is(a.Err, etcd.ErrTooLarge)
		notAllowed = notAllowed || errors.Is(a.Err, etcd.ErrEndpointNotAllowed)
	}
	if len(errs) == 0 {
		// Note: every endpoint answered, but none with a member list of the cluster.
		return fmt.Errorf("%w: no etcd member of the cluster answered with its member list", etcd.ErrUnreachable)
	}
	if tooLarge {
		return fmt.Errorf("%w: no etcd member of the cluster answered within the bounds: %w", etcd.ErrTooLarge, errors.Join(errs...))
	}
	if notAllowed {
		return fmt.Errorf("%w: no etcd member of the cluster answered, and its endpoints lie outside the networks etcd-adapter may dial (--etcd-allowed-networks): %w", etcd.ErrEndpointNotAllowed, errors.Join(errs...))
	}
	if tlsOnly {
		return fmt.Errorf("%w: no etcd member accepted the credentials or presented a certificate the etcd CA signed: %w", etcd.ErrInvalidInput, errors.Join(errs...))
	}
	return fmt.Errorf("%w: no etcd member of the cluster answered: %w", etcd.ErrUnreachable, errors.Join(errs...))
}
