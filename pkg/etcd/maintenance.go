package etcd

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefragPolicy is spec.maintenance.defragmentation as DecideMaintenance reads it.
type DefragPolicy struct {
	// FreeBytes: a member whose free pages (DBSize - DBSizeInUse) reach it is fragmented; zero
	// means free bytes alone never make a member fragmented.
	FreeBytes int64
	// FreePercent: a member whose free pages reach this share of DBSize is fragmented; zero means
	// the share alone never does. With FreeBytes too, both must be reached.
	FreePercent int32
	// OnNoSpace turns on the recovery from a NOSPACE alarm.
	OnNoSpace bool
	// Quota is the quota of a member that does not report its own (etcd before v3.6).
	Quota int64
	// HeadroomPercent is the share of its quota a member's DBSize must stay below before NOSPACE
	// is disarmed.
	HeadroomPercent int32
}

// Reasons of a defragmentation (the decision's, and the status record's).
const (
	// DefragReasonNoSpace: a NOSPACE alarm is raised and the member's database file is above its
	// quota less the headroom.
	DefragReasonNoSpace = "NoSpace"
	// DefragReasonFreeSpace: the member's free pages passed the thresholds.
	DefragReasonFreeSpace = "FreeSpaceThreshold"
)

// MaintenanceAction is the one thing DecideMaintenance says to do next.
type MaintenanceAction string

// Maintenance actions.
const (
	// MaintenanceNone: nothing needs doing.
	MaintenanceNone MaintenanceAction = "None"
	// MaintenanceBlocked: something needs doing and is not safe or not possible now; Message says
	// why.
	MaintenanceBlocked MaintenanceAction = "Blocked"
	// MaintenanceMoveLeader: move leadership off Member (to the first of Candidates that takes
	// it) so that it can be defragmented as a follower.
	MaintenanceMoveLeader MaintenanceAction = "MoveLeader"
	// MaintenanceDefragment: defragment Member.
	MaintenanceDefragment MaintenanceAction = "Defragment"
	// MaintenanceDisarmNoSpace: disarm the NOSPACE alarms in Alarms.
	MaintenanceDisarmNoSpace MaintenanceAction = "DisarmNoSpace"
)

// MaintenanceStep is DecideMaintenance's verdict: one action and why.
type MaintenanceStep struct {
	// Action is what to do.
	Action MaintenanceAction
	// Member is the member to defragment, or to move leadership off.
	Member Member
	// Candidates are the members that may take leadership (MoveLeader), best first.
	Candidates []Member
	// Alarms are the NOSPACE alarms to disarm (DisarmNoSpace).
	Alarms []ActiveAlarm
	// Reason is the DefragReason* of a defragmentation (and of the leader move
	// before it).
	Reason string
	// Before is Member's database as last observed (Defragment).
	Before MemberStatus
	// Message says to a person what is done or waited for, with the sizes behind it.
	Message string
}

// StaleInUseRetryAfter is how long after its last defragmentation a member whose reported
// DBSizeInUse is above its NOSPACE target is not defragmented again (see DecideMaintenance).
const StaleInUseRetryAfter = 10 * time.Minute

// memberSpace is what the decision knows about one member's database.
type memberSpace struct {
	health MemberHealth
	status *MemberStatus
	quota  int64
}

func (m memberSpace) free() int64 { return m.status.DBSize - m.status.DBSizeInUse }

// target is the DBSize below which the member has headroom under its quota.
func (m memberSpace) target(p DefragPolicy) int64 {
	return m.quota / 100 * int64(100-p.HeadroomPercent)
}

// DecideMaintenance decides the next single maintenance step on the observed cluster:
//
//   - while a NOSPACE alarm is raised (and p.OnNoSpace), the members whose database file is above
//     its quota less the headroom are defragmented, when a defragmentation would bring them below
//     it (DBSizeInUse is what a defragmentation leaves); once every member is below, the alarm
//     is disarmed. etcd refuses writes while the alarm is raised (server/etcdserver apply.go
//     applierV3Capped) and does not check space when it is disarmed, so disarming early only
//     raises it again on the next write;
//   - otherwise, a member whose free pages pass p's thresholds is defragmented.
//
// One member at a time, followers first and the leader last; leadership is moved off a member
// before it is defragmented (etcd blocks a member's reads and writes while it defragments, and
// a blocked leader stalls every write). A defragmentation is decided only while the voters
// other than the member, healthy ones only, are a strict majority of the voters and learners:
// quorum holds with the member counted as down even if a learner is promoted meanwhile. A NOSPACE
// alarm does not count against a member's health here: the member still takes part in raft;
// only writes are refused. It never compacts: the kube-apiserver does (its
// --etcd-compaction-interval), and which revisions to keep is its call.
//
// A member's DBSizeInUse is what etcd computed at its backend's last commit, and pages freed
// while a read transaction was open count as in use until then; under NOSPACE nothing may be
// committed for a long time. So a member whose reported use looks too high to defragment below
// the target is defragmented once anyway when it was not defragmented within
// StaleInUseRetryAfter (lastDefragmented, by member ID): the defragmentation measures its use
// afresh.
func DecideMaintenance(s *Snapshot, now time.Time, p DefragPolicy, lastDefragmented map[uint64]time.Time) MaintenanceStep {
	if s == nil {
		return MaintenanceStep{Action: MaintenanceBlocked, Message: "etcd could not be observed, so no maintenance is known to be safe"}
	}
	spaces := spacesOf(s, now, p)
	noSpace := noSpaceAlarms(s)
	if p.OnNoSpace && len(noSpace) > 0 {
		return decideNoSpace(s, spaces, noSpace, p, func(id uint64) bool {
			at, ok := lastDefragmented[id]
			return ok && now.Sub(at) < StaleInUseRetryAfter
		})
	}
	return decideFragmented(s, spaces, p)
}

// spacesOf assesses every member on the snapshot with its NOSPACE alarms taken off (see
// DecideMaintenance), with its database as it reported it.
func spacesOf(s *Snapshot, now time.Time, p DefragPolicy) []memberSpace {
	assessed := AssessMembers(withoutNoSpace(s), now)
	out := make([]memberSpace, 0, len(assessed))
	for _, mh := range assessed {
		ms := memberSpace{health: mh, quota: p.Quota}
		if ev, ok := s.EvidenceFor(mh.Member.ID); ok && ev.Contact == ContactAnswered && ev.Status != nil {
			ms.status = ev.Status
			if ev.Status.DBSizeQuota > 0 {
				ms.quota = ev.Status.DBSizeQuota
			}
		}
		out = append(out, ms)
	}
	return out
}

// withoutNoSpace is a copy of s without NOSPACE alarms.
func withoutNoSpace(s *Snapshot) *Snapshot {
	c := *s
	c.Alarms = slices.DeleteFunc(slices.Clone(s.Alarms), func(a ActiveAlarm) bool { return a.Alarm == AlarmNoSpace })
	c.Evidence = slices.Clone(s.Evidence)
	for i := range c.Evidence {
		c.Evidence[i].Alarms = slices.DeleteFunc(slices.Clone(c.Evidence[i].Alarms), func(a Alarm) bool { return a == AlarmNoSpace })
	}
	return &c
}

// hasNoSpace reports whether the cluster or any member reports a NOSPACE alarm.
func hasNoSpace(s *Snapshot) bool {
	if len(noSpaceAlarms(s)) > 0 {
		return true
	}
	return slices.ContainsFunc(s.Evidence, func(ev MemberEvidence) bool { return slices.Contains(ev.Alarms, AlarmNoSpace) })
}

func noSpaceAlarms(s *Snapshot) []ActiveAlarm {
	var out []ActiveAlarm
	for _, a := range s.Alarms {
		if a.Alarm == AlarmNoSpace {
			out = append(out, a)
		}
	}
	return out
}

// decideNoSpace defragments the members above their target that a defragmentation brings
// below it, and disarms once every member is below.
func decideNoSpace(s *Snapshot, spaces []memberSpace, alarms []ActiveAlarm, p DefragPolicy, recentlyDefragmented func(uint64) bool) MaintenanceStep {
	var over, unknown, stuck []string
	var candidates []memberSpace
	for _, ms := range spaces {
		switch {
		case ms.health.Member.IsLearner && ms.status == nil:
			// A learner that does not answer holds no vote, and etcd checks the quota on the
			// member that applies a write; it is not waited for.
		case ms.status == nil:
			unknown = append(unknown, ms.health.Member.String())
		case ms.status.DBSize <= ms.target(p):
		case ms.status.DBSizeInUse < ms.target(p) || !recentlyDefragmented(ms.health.Member.ID):
			over = append(over, describeSpace(ms, p))
			candidates = append(candidates, ms)
		default:
			stuck = append(stuck, describeSpace(ms, p))
		}
	}
	switch {
	case len(candidates) > 0:
		return decideDefrag(s, spaces, candidates, DefragReasonNoSpace,
			fmt.Sprintf("NOSPACE is raised and %s above quota less %d%% headroom", strings.Join(over, ", "), p.HeadroomPercent))
	case len(stuck) > 0:
		return MaintenanceStep{Action: MaintenanceBlocked, Message: fmt.Sprintf(
			"NOSPACE is raised and %s: defragmenting cannot bring a member below quota less %d%% headroom, as its data itself is above it (measured by its defragmentation within the last %s); the data must shrink (the kube-apiserver compacts old revisions; delete objects) or the quota be raised",
			strings.Join(stuck, ", "), p.HeadroomPercent, StaleInUseRetryAfter)}
	case len(unknown) > 0:
		return MaintenanceStep{Action: MaintenanceBlocked, Message: fmt.Sprintf(
			"NOSPACE is raised and the database size of %s is not known, so it is not disarmed", strings.Join(unknown, ", "))}
	}
	sizes := make([]string, 0, len(spaces))
	for _, ms := range spaces {
		if ms.status != nil {
			sizes = append(sizes, describeSpace(ms, p))
		}
	}
	return MaintenanceStep{Action: MaintenanceDisarmNoSpace, Alarms: alarms, Message: fmt.Sprintf(
		"every member is below its quota less %d%% headroom: %s", p.HeadroomPercent, strings.Join(sizes, ", "))}
}

// decideFragmented defragments a member whose free pages pass the thresholds.
func decideFragmented(s *Snapshot, spaces []memberSpace, p DefragPolicy) MaintenanceStep {
	if p.FreeBytes == 0 && p.FreePercent == 0 {
		return MaintenanceStep{Action: MaintenanceNone, Message: "no free-space threshold is set and no NOSPACE alarm is raised"}
	}
	var candidates []memberSpace
	var why []string
	for _, ms := range spaces {
		if ms.status != nil && fragmented(ms, p) {
			candidates = append(candidates, ms)
			why = append(why, fmt.Sprintf("%s has %s free of %s", ms.health.Member, FormatBytes(ms.free()), FormatBytes(ms.status.DBSize)))
		}
	}
	if len(candidates) == 0 {
		return MaintenanceStep{Action: MaintenanceNone, Message: "no member's free pages pass the thresholds"}
	}
	return decideDefrag(s, spaces, candidates, DefragReasonFreeSpace,
		fmt.Sprintf("%s (thresholds: %s)", strings.Join(why, ", "), thresholds(p)))
}

func fragmented(ms memberSpace, p DefragPolicy) bool {
	free := ms.free()
	if free <= 0 {
		return false
	}
	bytesOK := p.FreeBytes == 0 || free >= p.FreeBytes
	percentOK := p.FreePercent == 0 || free*100 >= int64(p.FreePercent)*ms.status.DBSize
	return bytesOK && percentOK
}

func thresholds(p DefragPolicy) string {
	var out []string
	if p.FreeBytes > 0 {
		out = append(out, FormatBytes(p.FreeBytes)+" free")
	}
	if p.FreePercent > 0 {
		out = append(out, fmt.Sprintf("%d%% free", p.FreePercent))
	}
	return strings.Join(out, " and ")
}

// decideDefrag picks the first candidate, followers first, and checks that the cluster keeps
// quorum with it counted as down.
func decideDefrag(s *Snapshot, spaces, candidates []memberSpace, reason, why string) MaintenanceStep {
	slices.SortStableFunc(candidates, func(a, b memberSpace) int {
		return cmp.Or(
			preferTrue(a.health.Member.ID != s.LeaderID, b.health.Member.ID != s.LeaderID),
			cmp.Compare(b.free(), a.free()),
			cmp.Compare(a.health.Member.Name, b.health.Member.Name),
			cmp.Compare(a.health.Member.ID, b.health.Member.ID),
		)
	})
	var skipped []string
	for _, c := range candidates {
		if c.health.Health != Healthy {
			skipped = append(skipped, c.health.Message)
			continue
		}
		if msg, ok := keepsQuorumWithout(spaces, c.health.Member); !ok {
			return MaintenanceStep{Action: MaintenanceBlocked, Reason: reason, Member: c.health.Member, Message: fmt.Sprintf("%s; not defragmenting %s: %s", why, c.health.Member, msg)}
		}
		if c.health.Member.ID == s.LeaderID {
			return MaintenanceStep{Action: MaintenanceMoveLeader, Reason: reason, Member: c.health.Member, Candidates: leaderCandidates(spaces, c.health.Member),
				Message: fmt.Sprintf("%s; %s leads, so leadership moves off it before it is defragmented", why, c.health.Member)}
		}
		return MaintenanceStep{Action: MaintenanceDefragment, Reason: reason, Member: c.health.Member, Before: *c.status,
			Message: fmt.Sprintf("%s; defragmenting %s", why, c.health.Member)}
	}
	return MaintenanceStep{Action: MaintenanceBlocked, Reason: reason, Message: fmt.Sprintf("%s; no member that needs it is healthy enough to defragment: %s", why, strings.Join(skipped, "; "))}
}

// keepsQuorumWithout reports whether the healthy voters other than m are a strict majority of
// the voters and learners (a learner may be promoted while m is blocked): the quorum
// projection's keepsMajority, with m counted as down.
func keepsQuorumWithout(spaces []memberSpace, m Member) (string, bool) {
	members := make([]MemberHealth, 0, len(spaces))
	for _, ms := range spaces {
		mh := ms.health
		if mh.Member.ID == m.ID {
			mh.Health, mh.NoSpace = Unhealthy, false
		}
		members = append(members, mh)
	}
	c := countQuorum(members)
	msg := fmt.Sprintf("with it blocked, %d of %d voters would be healthy and serving", c.healthyVoters, c.voters)
	if c.learners > 0 {
		msg += fmt.Sprintf(", and %d learner(s) may be promoted meanwhile", c.learners)
	}
	return msg, c.keepsMajority()
}

// leaderCandidates are the healthy voters other than m that answered with their database, least
// fragmented first (a member about to be defragmented itself would only hand leadership on
// again), then by name.
func leaderCandidates(spaces []memberSpace, m Member) []Member {
	var cs []memberSpace
	for _, ms := range spaces {
		if !ms.health.Member.IsLearner && ms.health.Health == Healthy && ms.health.Member.ID != m.ID && ms.status != nil {
			cs = append(cs, ms)
		}
	}
	slices.SortStableFunc(cs, func(a, b memberSpace) int {
		return cmp.Or(cmp.Compare(a.free(), b.free()), cmp.Compare(a.health.Member.Name, b.health.Member.Name))
	})
	out := make([]Member, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.health.Member)
	}
	return out
}

func describeSpace(ms memberSpace, p DefragPolicy) string {
	return fmt.Sprintf("%s is at %s (%s in use) of quota %s, target %s", ms.health.Member, FormatBytes(ms.status.DBSize),
		FormatBytes(ms.status.DBSizeInUse), FormatBytes(ms.quota), FormatBytes(ms.target(p)))
}

// FormatBytes says a size in bytes for a person, in MiB (or KiB, or B, below one).
func FormatBytes(b int64) string {
	switch {
	case b >= 1<<20 || b <= -(1<<20):
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10 || b <= -(1<<10):
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// Defragmentation is what a backend's Defragment did.
type Defragmentation struct {
	// Member is the member defragmented.
	Member Member
	// Before is the member's database as observed right before the call.
	Before MemberStatus
	// After is the member's database as its Status said right after; nil when it did not answer.
	After *MemberStatus
	// Start is when the call was made, and Took how long it took.
	Start time.Time
	Took  time.Duration
}
