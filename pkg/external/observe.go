package external

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// answer is what asking one endpoint gave.
type answer struct {
	endpoint string
	at       time.Time
	err      error // set when the endpoint did not answer at all

	selfID, clusterID, leaderID, raftTerm uint64
	status                                *etcd.MemberStatus // what Status said; nil when it did not answer
	members                               []etcd.Member      // nil when not reported
	alarms                                []etcd.ActiveAlarm
	errors                                []string
	// removed says why the member that answered is not a member any more: it was not asked
	// for its Status and takes no part in deciding the member list.
	removed string
}

func (a answer) answered() bool { return a.err == nil }

// observation is a snapshot plus the answers it was built from.
type observation struct {
	snap      *etcd.Snapshot
	clusterID uint64
	answers   []answer // sorted by endpoint
	creds     *credentials
}

// self returns the answer member id gave about itself, as a member of the observed cluster.
func (o *observation) self(id uint64) (answer, bool) {
	for _, a := range o.answers {
		if id != 0 && a.answered() && a.removed == "" && a.clusterID == o.clusterID && a.selfID == id {
			return a, true
		}
	}
	return answer{}, false
}

// strangers returns the answers from another cluster than the observed one.
func (o *observation) strangers() []answer {
	var out []answer
	for _, a := range o.answers {
		if a.answered() && a.removed == "" && a.clusterID != o.clusterID {
			out = append(out, a)
		}
	}
	return out
}

// Observe asks every endpoint, and every client URL the members report, in parallel, for its
// status, member list and alarms. Members that do not answer are evidence, not errors; an
// endpoint answering for another cluster is evidence of its own, never merged. Observe fails
// when no member of the cluster answered: etcd.ErrInvalidInput when every member refused the
// credentials (a wrong CA or a client certificate of another CA) or the Secrets are unusable,
// etcd.ErrUnreachable otherwise.
func (b *Backend) Observe(ctx context.Context) (*etcd.Snapshot, error) {
	o, err := b.observe(ctx)
	if err != nil {
		return nil, err
	}
	return o.snap, nil
}

func (b *Backend) observe(ctx context.Context) (*observation, error) {
	creds, err := b.loadCredentials(ctx)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	knownID, last := b.clusterID, slices.Clone(b.last)
	b.mu.Unlock()
	endpoints := b.endpoints(last)
	if len(endpoints) > maxEndpoints {
		return nil, fmt.Errorf("%w: the etcd members report %d client URLs (at most %d are asked)", etcd.ErrTooLarge, len(endpoints), maxEndpoints)
	}
	answers := b.askAll(ctx, endpoints, creds)
	clusterID := knownID
	if clusterID == 0 {
		if clusterID, err = clusterIDOf(answers); err != nil {
			return nil, err
		}
	}
	members := memberList(answers, clusterID)
	if members == nil {
		if clusterID == knownID && last != nil && slices.ContainsFunc(answers, func(a answer) bool { return a.answered() }) {
			// Only strangers answered: the member list is the last one this cluster reported,
			// and the strangers' answers count against its members.
			members = last
		} else {
			return nil, noAnswerError(answers)
		}
	}
	o := &observation{clusterID: clusterID, answers: answers, creds: creds}
	o.snap = snapshot(o, members, time.Now())
	b.mu.Lock()
	if b.clusterID == 0 {
		b.clusterID = clusterID
	}
	if memberList(answers, clusterID) != nil {
		b.last = slices.Clone(members)
	}
	for _, a := range answers {
		if a.answered() {
			b.selfAt[a.endpoint] = a.selfID
		}
	}
	b.mu.Unlock()
	b.retain(b.endpoints(members))
	b.logger(ctx).V(4).Info("Observed external etcd", "members", len(members), "endpoints", len(endpoints))
	return o, nil
}

// maxEndpoints bounds the endpoints asked at once, each with a goroutine and a kept connection:
// two client URLs for each of etcd.MaxMembers members (etcdadm and kubeadm advertise one).
const maxEndpoints = 2 * etcd.MaxMembers

// endpoints are the configured endpoints and the https client URLs of the given members, once
// each. A client URL that is not https://host:port is not asked (see checkEndpoint).
func (b *Backend) endpoints(members []etcd.Member) []string {
	var out []string
	for _, ep := range b.cfg.Endpoints {
		out = append(out, normalise(ep))
	}
	for _, m := range members {
		for _, u := range m.ClientURLs {
			if checkEndpoint(normalise(u)) == nil {
				out = append(out, normalise(u))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// askAll asks every endpoint at once.
func (b *Backend) askAll(ctx context.Context, endpoints []string, creds *credentials) []answer {
	out := make([]answer, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Go(func() { out[i] = b.ask(ctx, ep, creds) })
	}
	wg.Wait()
	return out
}

// ask asks one endpoint for its member list and Status. An endpoint whose member may have been
// removed is asked for its member lists first, and for its Status only when it is still a
// member.
//
// Important! etcd v3.6 panics ("failed to find local ID in cluster members") when a member that
// applied its own removal, and has not stopped yet, is asked for its Status: the server looks
// itself up in its member list to report IsLearner. External endpoint lists keep naming a
// removed member until someone edits them, so such a member is never asked for Status.
//
// Note: alarms come from Status, where etcd lists every active alarm among the errors.
// AlarmList is not used: etcd serves it as a raft proposal, a WAL write and fsync on every
// member, which asking every member on every observation would multiply.
func (b *Backend) ask(ctx context.Context, ep string, creds *credentials) (a answer) {
	a.endpoint = ep
	defer func() { a.at = time.Now() }()
	cli, err := b.client(ctx, ep, creds)
	if err != nil {
		a.err = err
		return a
	}
	// Serializable: the member's own view, so a member cut off from the leader still says
	// what it sees.
	ml, mlErr := call(ctx, b, "MemberList", func(ctx context.Context) (*clientv3.MemberListResponse, error) {
		return cli.MemberList(ctx, clientv3.WithSerializable())
	})
	var members []etcd.Member
	if mlErr == nil {
		members = toMembers(ml.Members)
		mlErr = etcd.CheckMembers(members)
	}
	if mlErr != nil {
		mlErr = b.rpcError(ctx, ep, "MemberList", mlErr)
		if errors.Is(mlErr, etcd.ErrTooLarge) {
			// Nothing this member says is read any further.
			a.err = mlErr
			return a
		}
	}
	if mlErr == nil {
		self := ml.Header.GetMemberId()
		a.selfID, a.clusterID = self, ml.Header.GetClusterId()
		if why := b.removedWhy(ctx, cli, ep, ml); why != "" {
			a.removed = why
			return a
		}
		a.members = members
	}
	st, err := call(ctx, b, "Status", func(ctx context.Context) (*clientv3.StatusResponse, error) { return cli.Status(ctx, ep) })
	switch {
	case err != nil && mlErr != nil:
		a.err = b.rpcError(ctx, ep, "Status", err)
		return a
	case err != nil:
		a.errors = append(a.errors, fmt.Sprintf("status: %v", b.rpcError(ctx, ep, "Status", err)))
		return a
	case mlErr != nil:
		a.errors = append(a.errors, fmt.Sprintf("member list: %v", mlErr))
	}
	a.selfID, a.clusterID = st.Header.GetMemberId(), st.Header.GetClusterId()
	a.leaderID, a.raftTerm = st.Leader, st.RaftTerm
	a.status = &etcd.MemberStatus{DBSize: st.DbSize, DBSizeInUse: st.DbSizeInUse, DBSizeQuota: st.DbSizeQuota, RaftTerm: st.RaftTerm, RaftAppliedIndex: st.RaftAppliedIndex}
	errs, alarms := splitStatusErrors(st.Errors)
	a.errors = append(a.errors, etcd.SanitizeTexts(errs, etcd.MaxErrorsPerMember, etcd.MaxTextBytes)...)
	a.alarms = alarms[:min(len(alarms), etcd.MaxErrorsPerMember)]
	return a
}

// removedWhy says why the member at ep is not a member of the cluster any more, or "" when it
// is. Only an endpoint that may have been removed (mayBeRemoved) costs a linearizable member
// list.
func (b *Backend) removedWhy(ctx context.Context, cli *clientv3.Client, ep string, ml *clientv3.MemberListResponse) string {
	self := ml.Header.GetMemberId()
	switch {
	case !slices.ContainsFunc(ml.Members, func(m *pb.Member) bool { return m.ID == self }):
		return fmt.Sprintf("member %x is not in its own member list: it was removed", self)
	case b.isGone(self):
		return fmt.Sprintf("member %x was removed from the cluster and has not applied its removal yet", self)
	case !b.mayBeRemoved(ep):
		return ""
	}
	lin, err := call(ctx, b, "MemberList", func(ctx context.Context) (*clientv3.MemberListResponse, error) { return cli.MemberList(ctx) })
	switch {
	case err != nil:
		return fmt.Sprintf("member %x may have been removed, and the cluster's linearizable member list could not be read through it: %v", self, b.rpcError(ctx, ep, "MemberList", err))
	case !slices.ContainsFunc(lin.Members, func(m *pb.Member) bool { return m.ID == self }):
		return fmt.Sprintf("member %x is not in the cluster's linearizable member list: it was removed", self)
	}
	return ""
}

// mayBeRemoved reports whether the member at ep may have been removed: this backend has observed
// nothing yet (another process may have removed it), no member it saw last lists ep as its client
// URL, or this backend asked etcd to remove the member that answered there last.
func (b *Backend) mayBeRemoved(ep string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == nil || b.removing[b.selfAt[ep]] {
		return true
	}
	return !slices.ContainsFunc(b.last, func(m etcd.Member) bool {
		return slices.ContainsFunc(m.ClientURLs, func(u string) bool { return normalise(u) == ep })
	})
}

func (b *Backend) isGone(id uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gone[id]
}

// statusAlarm matches the entries etcd adds to Status errors for every active alarm: the
// protobuf text of an AlarmMember, e.g. "memberID:10276657743932975437 alarm:NOSPACE ".
var statusAlarm = regexp.MustCompile(`^memberID:(\d+)\s+alarm:([A-Z]+)\s*$`)

// splitStatusErrors separates the alarms in Status errors from the member's other errors.
func splitStatusErrors(errs []string) ([]string, []etcd.ActiveAlarm) {
	var out []string
	var alarms []etcd.ActiveAlarm
	for _, e := range errs {
		m := statusAlarm.FindStringSubmatch(e)
		id, err := strconv.ParseUint(safeIndex(m, 1), 10, 64)
		if m == nil || err != nil {
			out = append(out, e)
			continue
		}
		alarms = append(alarms, etcd.ActiveAlarm{MemberID: id, Alarm: etcd.Alarm(m[2])})
	}
	return out, alarms
}

func safeIndex(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}

// toMembers converts etcd's member list. NodeName is the member name: external members host no
// workload Node, and etcdadm and kubeadm name a member after its host. A name is made one
// printable line (etcd.SanitizeText): it goes into status and Events, and a name with control
// characters matches no Node name either way. The caller checks the bounds (etcd.CheckMembers).
func toMembers(ms []*pb.Member) []etcd.Member {
	out := make([]etcd.Member, 0, len(ms))
	for _, m := range ms {
		name := m.Name
		if len(name) <= etcd.MaxMemberNameBytes {
			name = etcd.SanitizeText(name, etcd.MaxMemberNameBytes)
		}
		out = append(out, etcd.Member{ID: m.ID, Name: name, NodeName: name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
	}
	return out
}

// clusterIDOf is the cluster ID most endpoints answer with. A tie is an error, never a guess:
// the endpoints name members of two clusters in equal numbers.
func clusterIDOf(answers []answer) (uint64, error) {
	counts := map[uint64]int{}
	for _, a := range answers {
		if a.answered() && a.removed == "" && a.clusterID != 0 {
			counts[a.clusterID]++
		}
	}
	var best uint64
	bestN, tie := 0, false
	for id, n := range counts {
		switch {
		case n > bestN:
			best, bestN, tie = id, n, false
		case n == bestN:
			tie = true
		}
	}
	if tie {
		ids := make([]string, 0, len(counts))
		for id := range counts {
			ids = append(ids, fmt.Sprintf("%x", id))
		}
		slices.Sort(ids)
		return 0, fmt.Errorf("%w: the etcd endpoints answer for clusters %s in equal numbers; cannot tell which one is this Cluster's etcd", etcd.ErrInvalidInput, strings.Join(ids, ", "))
	}
	if best == 0 {
		return 0, noAnswerError(answers)
	}
	return best, nil
}

// memberList is the member list of the cluster: the leader's own when it answered (it has
// applied every committed change), else the one most of the cluster's members report.
func memberList(answers []answer, clusterID uint64) []etcd.Member {
	counts := map[string]int{}
	byKey := map[string][]etcd.Member{}
	for _, a := range answers {
		if !a.answered() || a.clusterID != clusterID || a.members == nil {
			continue
		}
		if a.leaderID == a.selfID {
			return slices.Clone(a.members)
		}
		k := listKey(a.members)
		counts[k]++
		byKey[k] = a.members
	}
	best, bestN := "", 0
	for k, n := range counts {
		if n > bestN || (n == bestN && k < best) {
			best, bestN = k, n
		}
	}
	if bestN == 0 {
		return nil
	}
	return slices.Clone(byKey[best])
}

func listKey(ms []etcd.Member) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%x/%t", m.ID, m.IsLearner))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// leaderOf is the member that says it leads, in the highest term; else the one most followers name.
func leaderOf(o *observation) uint64 {
	var best answer
	followers := map[uint64]int{}
	for _, a := range o.answers {
		if !a.answered() || a.clusterID != o.clusterID || a.leaderID == 0 {
			continue
		}
		if a.leaderID != a.selfID {
			followers[a.leaderID]++
			continue
		}
		if best.selfID == 0 || a.raftTerm > best.raftTerm {
			best = a
		}
	}
	if best.selfID != 0 {
		return best.selfID
	}
	var id uint64
	n := 0
	for l, c := range followers {
		if c > n || (c == n && l < id) {
			id, n = l, c
		}
	}
	return id
}

// snapshot files one piece of evidence per member of the list, under the member's ID:
//   - the member answered about itself through one of the endpoints: what it said;
//   - an endpoint among its client URLs answered from another cluster: that answer, so it counts
//     against the member (split brain);
//   - else: unreachable, with the error of its client URLs (or why it could not be asked).
//
// An endpoint that answers from another cluster and is no member's client URL gets evidence of
// its own, under the ID it reports, with no Node: it is reported, never merged.
func snapshot(o *observation, members []etcd.Member, now time.Time) *etcd.Snapshot {
	s := &etcd.Snapshot{Backend: BackendName, ObservedAt: now, Members: members}
	s.LeaderID = leaderOf(o)
	for _, a := range o.answers {
		if a.answered() && a.clusterID == o.clusterID {
			for _, al := range a.alarms {
				if !slices.Contains(s.Alarms, al) {
					s.Alarms = append(s.Alarms, al)
				}
			}
		}
	}
	slices.SortFunc(s.Alarms, func(x, y etcd.ActiveAlarm) int {
		return cmp.Or(cmp.Compare(x.MemberID, y.MemberID), cmp.Compare(x.Alarm, y.Alarm))
	})
	used := map[string]bool{}
	for _, m := range members {
		ev := etcd.MemberEvidence{MemberID: m.ID, NodeName: m.NodeName, ObservedAt: now}
		for _, al := range s.Alarms {
			if al.MemberID == m.ID {
				ev.Alarms = append(ev.Alarms, al.Alarm)
			}
		}
		if a, ok := o.self(m.ID); ok {
			used[a.endpoint] = true
			ev = answered(ev, a)
			// Only the member's own answer speaks for its database and raft log.
			ev.Status = a.status
			s.Evidence = append(s.Evidence, ev)
			continue
		}
		var errs []string
		stranger := false
		for _, u := range m.ClientURLs {
			a, ok := answerAt(o.answers, normalise(u))
			switch {
			case !ok:
			case !a.answered():
				used[a.endpoint] = true
				errs = append(errs, a.err.Error())
			case a.clusterID != o.clusterID:
				used[a.endpoint] = true
				ev, stranger = answered(ev, a), true
			default:
				// Another member of this cluster answers at this member's client URL.
				used[a.endpoint] = true
				errs = append(errs, fmt.Sprintf("%s answers as etcd member %x, not as %s", a.endpoint, a.selfID, m))
			}
		}
		switch {
		case stranger:
		case len(m.ClientURLs) == 0:
			ev.Contact, ev.Error = etcd.ContactUnreachable, fmt.Sprintf("etcd member %s has no client URL, so it cannot be asked", m)
		case len(errs) == 0:
			ev.Contact, ev.Error = etcd.ContactUnreachable, fmt.Sprintf("no endpoint answered as etcd member %s (https client URLs asked of %s)", m, etcd.SanitizeText(strings.Join(m.ClientURLs, ", "), etcd.MaxTextBytes))
		default:
			ev.Contact, ev.Error = etcd.ContactUnreachable, strings.Join(errs, "; ")
		}
		s.Evidence = append(s.Evidence, ev)
	}
	for _, a := range o.answers {
		if used[a.endpoint] || (a.answered() && a.clusterID == o.clusterID && slices.ContainsFunc(members, func(m etcd.Member) bool { return m.ID == a.selfID })) {
			continue
		}
		ev := etcd.MemberEvidence{MemberID: a.selfID, ObservedAt: now}
		if !a.answered() {
			// A configured endpoint no member lists as its client URL, that does not answer.
			ev.Contact, ev.Error = etcd.ContactUnreachable, a.err.Error()
			s.Evidence = append(s.Evidence, ev)
			continue
		}
		if a.removed != "" {
			ev.Contact, ev.Error = etcd.ContactUnknown, fmt.Sprintf("endpoint %s: %s", a.endpoint, a.removed)
			s.Evidence = append(s.Evidence, ev)
			continue
		}
		ev = answered(ev, a)
		if a.clusterID != o.clusterID {
			ev.Error = fmt.Sprintf("endpoint %s answers for etcd cluster %x, not for this Cluster's etcd cluster %x", a.endpoint, a.clusterID, o.clusterID)
		}
		s.Evidence = append(s.Evidence, ev)
	}
	return s
}

// answered fills ev with what a said.
func answered(ev etcd.MemberEvidence, a answer) etcd.MemberEvidence {
	ev.Contact, ev.ObservedAt = etcd.ContactAnswered, a.at
	ev.ClusterID, ev.Members, ev.LeaderID, ev.Errors = a.clusterID, a.members, a.leaderID, a.errors
	return ev
}

func answerAt(answers []answer, ep string) (answer, bool) {
	for _, a := range answers {
		if a.endpoint == ep {
			return a, true
		}
	}
	return answer{}, false
}

// noAnswerError says why no member answered: ErrInvalidInput when every endpoint refused the
// credentials (retrying will not help), ErrUnreachable otherwise.
func noAnswerError(answers []answer) error {
	var errs []error
	tlsOnly, tooLarge := len(answers) > 0, false
	for _, a := range answers {
		if a.answered() {
			continue
		}
		errs = append(errs, a.err)
		tlsOnly = tlsOnly && isTLSFailure(a.err)
		tooLarge = tooLarge || errors.Is(a.err, etcd.ErrTooLarge)
	}
	if len(errs) == 0 {
		// Note: every endpoint answered, but none with a member list of the cluster.
		return fmt.Errorf("%w: no etcd member of the cluster answered with its member list", etcd.ErrUnreachable)
	}
	if tooLarge {
		return fmt.Errorf("%w: no etcd member of the cluster answered within the bounds: %w", etcd.ErrTooLarge, errors.Join(errs...))
	}
	if tlsOnly {
		return fmt.Errorf("%w: no etcd member accepted the credentials or presented a certificate the etcd CA signed: %w", etcd.ErrInvalidInput, errors.Join(errs...))
	}
	return fmt.Errorf("%w: no etcd member of the cluster answered: %w", etcd.ErrUnreachable, errors.Join(errs...))
}
