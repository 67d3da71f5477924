package external

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
)

// snapshot files one piece of evidence per member of the list, under the member's ID:
//   - the member answered about itself through one of the endpoints: what it said;
//   - an endpoint among its client URLs answered from another cluster: that answer, so it counts
//     against the member (split brain);
//   - none of its client URLs may be dialled (dialable): unknown, saying none is a configured
//     endpoint; it was not dialled, and its health is not guessed;
//   - its client URLs were refused by the allowed networks only: unknown, saying so;
//   - else: unreachable, with the error of its client URLs (or why it could not be asked).
//
// An endpoint that answers from another cluster and is no member's client URL gets evidence of
// its own, under the ID it reports, with no Node: it is reported, never merged.
func snapshot(o *membership.Observation, dialable func(string) bool, now time.Time) *etcd.Snapshot {
	members := withNodeNames(o.Decision.Members)
	s := &etcd.Snapshot{Backend: BackendName, ObservedAt: now, Members: members, LeaderID: o.Decision.LeaderID, Alarms: slices.Clone(o.Decision.Alarms)}
	used := map[string]bool{}
	for _, m := range members {
		s.Evidence = append(s.Evidence, memberEvidence(o, m, dialable, used, now))
	}
	for _, a := range o.Answers {
		if used[a.Where] || (a.Answered() && a.ClusterID == o.Decision.ClusterID && slices.ContainsFunc(members, func(m etcd.Member) bool { return m.ID == a.SelfID })) {
			continue
		}
		s.Evidence = append(s.Evidence, endpointEvidence(o, a, now))
	}
	return s
}

// memberEvidence is the evidence about member m, and marks the endpoints it used.
func memberEvidence(o *membership.Observation, m etcd.Member, dialable func(string) bool, used map[string]bool, now time.Time) etcd.MemberEvidence {
	ev := etcd.MemberEvidence{MemberID: m.ID, NodeName: m.NodeName, ObservedAt: now}
	for _, al := range o.Decision.Alarms {
		if al.MemberID == m.ID {
			ev.Alarms = append(ev.Alarms, al.Alarm)
		}
	}
	if a, ok := o.AnswerOf(m.ID); ok {
		used[a.Where] = true
		ev = answered(ev, a)
		// Only the member's own answer speaks for its database and raft log.
		ev.Status = a.Status
		return ev
	}
	if len(m.ClientURLs) > 0 && !slices.ContainsFunc(m.ClientURLs, dialable) {
		ev.Contact, ev.Error = etcd.ContactUnknown, fmt.Sprintf("etcd member %s reports client URLs (%s) none of which is a configured etcd endpoint of the Cluster, so it was not dialled",
			m, etcd.SanitizeText(strings.Join(m.ClientURLs, ", "), etcd.MaxTextBytes))
		return ev
	}
	var errs []string
	stranger, refusedOnly := false, true
	for _, u := range m.ClientURLs {
		a, ok := o.At(normalise(u))
		switch {
		case !ok:
		case !a.Answered():
			used[a.Where] = true
			errs = append(errs, a.Err.Error())
			refusedOnly = refusedOnly && errors.Is(a.Err, etcd.ErrEndpointNotAllowed)
		case a.ClusterID != o.Decision.ClusterID:
			used[a.Where] = true
			ev, stranger = answered(ev, a), true
		default:
			// Another member of this cluster answers at this member's client URL.
			used[a.Where] = true
			errs = append(errs, fmt.Sprintf("%s answers as etcd member %x, not as %s", a.Where, a.SelfID, m))
		}
	}
	switch {
	case stranger:
	case len(m.ClientURLs) == 0:
		ev.Contact, ev.Error = etcd.ContactUnreachable, fmt.Sprintf("etcd member %s has no client URL, so it cannot be asked", m)
	case len(errs) > 0 && refusedOnly:
		ev.Contact, ev.Error = etcd.ContactUnknown, strings.Join(errs, "; ")
	case len(errs) == 0:
		ev.Contact, ev.Error = etcd.ContactUnreachable, fmt.Sprintf("no endpoint answered as etcd member %s (https client URLs asked of %s)", m, etcd.SanitizeText(strings.Join(m.ClientURLs, ", "), etcd.MaxTextBytes))
	default:
		ev.Contact, ev.Error = etcd.ContactUnreachable, strings.Join(errs, "; ")
	}
	return ev
}

// endpointEvidence is the evidence of an endpoint that answered as no member of the list.
func endpointEvidence(o *membership.Observation, a membership.Answer, now time.Time) etcd.MemberEvidence {
	ev := etcd.MemberEvidence{MemberID: a.SelfID, ObservedAt: now}
	switch {
	case !a.Answered():
		// A configured endpoint no member lists as its client URL, that does not answer (or was
		// not dialled: outside the allowed networks).
		ev.Contact, ev.Error = etcd.ContactUnreachable, a.Err.Error()
		if errors.Is(a.Err, etcd.ErrEndpointNotAllowed) {
			ev.Contact = etcd.ContactUnknown
		}
		return ev
	case a.Removed != "":
		ev.Contact, ev.Error = etcd.ContactUnknown, fmt.Sprintf("endpoint %s: %s", a.Where, a.Removed)
		return ev
	}
	ev = answered(ev, a)
	if a.ClusterID != o.Decision.ClusterID {
		ev.Error = fmt.Sprintf("endpoint %s answers for etcd cluster %x, not for this Cluster's etcd cluster %x", a.Where, a.ClusterID, o.Decision.ClusterID)
	}
	return ev
}

// answered fills ev with what a said.
func answered(ev etcd.MemberEvidence, a membership.Answer) etcd.MemberEvidence {
	ev.Contact, ev.ObservedAt = etcd.ContactAnswered, a.At
	ev.ClusterID, ev.Members, ev.LeaderID, ev.Errors = a.ClusterID, withNodeNames(a.Members), a.LeaderID, a.Errors
	return ev
}

// withNodeNames sets every member's NodeName to its name: external members host no workload Node, and
// etcdadm and kubeadm name a member after its host.
func withNodeNames(members []etcd.Member) []etcd.Member {
	if members == nil {
		return nil
	}
	out := slices.Clone(members)
	for i := range out {
		out[i].NodeName = out[i].Name
	}
	return out
}
