package etcd

import (
	"fmt"
	"strconv"
	"time"
)

// Member is one etcd member as a member list reports it.
type Member struct {
	// ID is the etcd member ID.
	ID uint64
	// Name is the member name. It is empty for a member that was added but never started.
	Name string
	// NodeName is the Node hosting the member, as the backend maps it; empty when no Node
	// hosts it (a ghost member).
	NodeName string
	// PeerURLs and ClientURLs are as etcd reports them.
	PeerURLs   []string
	ClientURLs []string
	// IsLearner is true for a non-voting member.
	IsLearner bool
}

// Started reports whether the member ever started: etcd leaves the name empty until then.
func (m Member) Started() bool { return m.Name != "" }

// String names the member for messages: its name, or its ID when it never started.
func (m Member) String() string {
	if m.Name != "" {
		return m.Name
	}
	return fmt.Sprintf("%x (never started)", m.ID)
}

// Alarm is an etcd alarm type, by the names etcd gives them.
type Alarm string

// Alarms etcd raises.
const (
	AlarmNoSpace Alarm = "NOSPACE"
	AlarmCorrupt Alarm = "CORRUPT"
)

// ActiveAlarm is an alarm active on the cluster and the member it names.
type ActiveAlarm struct {
	// MemberID is the member the alarm names; it may have been removed since.
	MemberID uint64
	// Alarm is the alarm type.
	Alarm Alarm
}

// Contact says whether the backend got an answer from a member.
type Contact string

const (
	// ContactAnswered means the member (or, for K3s, the K3s process reporting on it) answered,
	// and the evidence's fields hold what it said.
	ContactAnswered Contact = "Answered"
	// ContactUnreachable means the member did not answer at all; Error says why.
	ContactUnreachable Contact = "Unreachable"
	// ContactUnknown means the backend has no trustworthy evidence about the member (for
	// example a K3s without the EtcdIsVoter condition); Error says why.
	ContactUnknown Contact = "Unknown"
)

// MemberEvidence is what one member reported about itself and the cluster, or why it could not.
// Backends that cannot ask a member directly fill in what they can and leave the rest zero;
// Snapshot.BlindSpots says which checks that disables.
type MemberEvidence struct {
	// MemberID identifies the member this evidence is about.
	MemberID uint64
	// NodeName is the Node through which the member was asked.
	NodeName string
	// Contact says whether the member answered.
	Contact Contact
	// Error is why the member did not answer or was unknown; empty when it answered.
	Error string
	// ObservedAt is when this evidence was produced (for K3s: the condition's heartbeat).
	ObservedAt time.Time

	// ClusterID is the cluster ID the member reported; zero when not reported.
	ClusterID uint64
	// Members is the member list the member reported; nil when not reported.
	Members []Member
	// LeaderID is the leader the member knows; zero when it knows none or did not say.
	LeaderID uint64
	// Alarms are the alarms active on this member.
	Alarms []Alarm
	// Errors are errors the member reported while answering (etcd Status errors, or K3s's
	// Unhealthy message): the member is listening but unhealthy.
	Errors []string
	// Status is what the member's etcd Status call said about its database and raft log; nil
	// when the backend does not call Status (K3s) or the member did not answer it.
	Status *MemberStatus
}

// MemberStatus is the part of etcd's StatusResponse (etcdserverpb.StatusResponse) that metrics
// export; fields etcd leaves zero are zero here.
type MemberStatus struct {
	// DBSize is the size of the member's backend database file in bytes.
	DBSize int64
	// DBSizeInUse is the part of DBSize that holds data; the rest is free pages a defragment
	// would give back.
	DBSizeInUse int64
	// DBSizeQuota is the member's backend quota in bytes (--quota-backend-bytes); etcd reports
	// it from v3.6 on and older members leave it zero.
	DBSizeQuota int64
	// RaftTerm is the member's current raft term.
	RaftTerm uint64
	// RaftAppliedIndex is the index of the last raft entry the member applied.
	RaftAppliedIndex uint64
}

// BlindSpot names a check a backend cannot make, so verdicts say so instead of claiming health.
type BlindSpot string

const (
	// BlindSpotGhostMembers means the backend cannot see members that no Node hosts.
	BlindSpotGhostMembers BlindSpot = "GhostMembers"
	// BlindSpotMemberLists means members' own member lists are not available for comparison.
	BlindSpotMemberLists BlindSpot = "MemberListAgreement"
	// BlindSpotClusterID means members' cluster IDs are not available for comparison.
	BlindSpotClusterID BlindSpot = "ClusterIDAgreement"
	// BlindSpotAlarms means alarms are not available.
	BlindSpotAlarms BlindSpot = "Alarms"
	// BlindSpotLeader means the backend does not know which member leads.
	BlindSpotLeader BlindSpot = "Leader"
)

// Snapshot is a backend's observation of one workload cluster's etcd at one time.
type Snapshot struct {
	// Backend names the implementation that produced the snapshot, e.g. "kubeadm" or "k3s".
	Backend string
	// ObservedAt is when the observation finished.
	ObservedAt time.Time
	// Members is the cluster's member list as the backend best knows it (the majority view
	// when members disagree). It includes learners and never-started members.
	Members []Member
	// LeaderID is the leader as the backend best knows it; zero when there is none.
	LeaderID uint64
	// Evidence holds one entry per member the backend tried to ask.
	Evidence []MemberEvidence
	// Alarms are the alarms active on the cluster, each with the member it names. etcd's alarms
	// are cluster-wide (NOSPACE stops writes on every member) and outlive the member that raised
	// them, so an alarm may name a member that is no longer in Members. Backends that cannot see
	// alarms leave it nil and declare BlindSpotAlarms.
	Alarms []ActiveAlarm
	// BlindSpots lists checks this backend cannot make.
	BlindSpots []BlindSpot
	// EvidenceTTL is how old evidence may be before it is not trusted; zero means
	// DefaultEvidenceTTL. Backends whose evidence is refreshed slowly (K3s rewrites an unchanged
	// condition every 5 minutes) set it longer.
	EvidenceTTL time.Duration
	// SyntheticMemberIDs means the member IDs in this snapshot (Member.ID, LeaderID, evidence
	// and alarms) are keys the backend made up because it cannot see etcd's (K3s publishes none
	// on Nodes): they tell members apart within the snapshot and in calls back to the same
	// backend, and nothing more. Such a backend identifies the member in RemoveMember and
	// WithdrawRemoval by its name and Node, so a caller may rebuild a member from a record of
	// those two with a zero ID.
	//
	// Important! Callers never show these IDs to a person (status, Events, conditions, logs):
	// etcd has its own ID for the same member (etcdctl member list), so the person would see one
	// member under two IDs. EtcdMemberID returns "" for them.
	SyntheticMemberIDs bool
}

// EtcdMemberID returns id as etcd shows member IDs (hexadecimal), or "" when the snapshot's
// member IDs are not etcd's (SyntheticMemberIDs): say such a member by its name and Node.
func (s *Snapshot) EtcdMemberID(id uint64) string {
	if s.SyntheticMemberIDs {
		return ""
	}
	return strconv.FormatUint(id, 16)
}

// DefaultEvidenceTTL is the age after which evidence is not trusted unless the backend says
// otherwise. It is a few reconcile periods: older evidence says more about the past than now.
const DefaultEvidenceTTL = 2 * time.Minute

// MemberByNode returns the one member hosted on the named Node. It reports false when no member
// or more than one is (a reused hostname whose old member was never removed): callers that act
// on members use MembersOnNode and name each member by its ID.
func (s *Snapshot) MemberByNode(nodeName string) (Member, bool) {
	on := s.MembersOnNode(nodeName)
	if len(on) != 1 {
		return Member{}, false
	}
	return on[0], true
}

// MembersOnNode returns every member hosted on the named Node, in the snapshot's order.
func (s *Snapshot) MembersOnNode(nodeName string) []Member {
	var out []Member
	for _, m := range s.Members {
		if nodeName != "" && m.NodeName == nodeName {
			out = append(out, m)
		}
	}
	return out
}

// MemberByID returns the member with the given ID.
func (s *Snapshot) MemberByID(id uint64) (Member, bool) {
	for _, m := range s.Members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// EvidenceFor returns the evidence about the member with the given ID.
func (s *Snapshot) EvidenceFor(id uint64) (MemberEvidence, bool) {
	for _, e := range s.Evidence {
		if e.MemberID == id {
			return e, true
		}
	}
	return MemberEvidence{}, false
}

// Blind reports whether the backend cannot make the given check.
func (s *Snapshot) Blind(b BlindSpot) bool {
	for _, x := range s.BlindSpots {
		if x == b {
			return true
		}
	}
	return false
}

// Leader returns the leading member, when the backend knows it.
func (s *Snapshot) Leader() (Member, bool) {
	if s.LeaderID == 0 {
		return Member{}, false
	}
	return s.MemberByID(s.LeaderID)
}
