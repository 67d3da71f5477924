package membership

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Answer is what asking the member at one place gave.
type Answer struct {
	// Where is the place the member was asked at: a Node name, an endpoint.
	Where string
	// At is when the answer came.
	At time.Time
	// Err is set when the member could not be reached at all.
	Err error

	// SelfID, ClusterID, LeaderID and RaftTerm are what the member said about itself: its ID,
	// its cluster's ID, the leader it knows (its own ID when it leads) and its raft term.
	SelfID, ClusterID, LeaderID, RaftTerm uint64
	// Status is what the member's Status call said about its database and raft log; nil when
	// it did not answer Status.
	Status *etcd.MemberStatus
	// Members is the member's own member list; nil when not reported (a learner, an error, a
	// removed member).
	Members []etcd.Member
	Alarms  []etcd.ActiveAlarm
	// Errors are what the member answered with besides its status, one bounded line each.
	Errors []string
	// Removed says why the member that answered is no member of the cluster any more: it was
	// not asked for its Status and takes no part in deciding the cluster.
	Removed string
}

// Answered reports whether the member answered at all.
func (a Answer) Answered() bool { return a.Err == nil }

// statusAlarm matches the entries etcd adds to Status errors for every active alarm: the
// protobuf text of an AlarmMember, e.g. "memberID:10276657743932975437 alarm:NOSPACE ".
var statusAlarm = regexp.MustCompile(`^memberID:(\d+)\s+alarm:([A-Z]+)\s*$`)

// SplitStatusErrors separates the alarms in Status errors from the member's other errors.
func SplitStatusErrors(errs []string) ([]string, []etcd.ActiveAlarm) {
	var out []string
	var alarms []etcd.ActiveAlarm
	for _, e := range errs {
		m := statusAlarm.FindStringSubmatch(e)
		if m == nil {
			out = append(out, e)
			continue
		}
		id, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil {
			out = append(out, e)
			continue
		}
		alarms = append(alarms, etcd.ActiveAlarm{MemberID: id, Alarm: etcd.Alarm(m[2])})
	}
	return out, alarms
}

// ToMembers translates etcd's members. NodeName is left to the backend, which places members.
// A name is made one printable line (etcd.SanitizeText): it goes into status and Events, and a
// name with control characters matches no Node name either way. The caller checks the bounds
// (etcd.CheckMembers).
func ToMembers(pbs []*pb.Member) []etcd.Member {
	out := make([]etcd.Member, 0, len(pbs))
	for _, m := range pbs {
		name := m.Name
		if len(name) <= etcd.MaxMemberNameBytes {
			name = etcd.SanitizeText(name, etcd.MaxMemberNameBytes)
		}
		out = append(out, etcd.Member{ID: m.ID, Name: name, IsLearner: m.IsLearner, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs})
	}
	return out
}

// IsLastVoter reports whether target is the only voting member.
func IsLastVoter(members []etcd.Member, target etcd.Member) bool {
	if target.IsLearner {
		return false
	}
	for _, m := range members {
		if m.ID != target.ID && !m.IsLearner {
			return false
		}
	}
	return true
}

// isLearnerRejection reports etcd's "rpc not supported for learner": a fact about the
// member, not a failure.
func isLearnerRejection(err error) bool {
	return err != nil && (errors.Is(err, rpctypes.ErrGRPCNotSupportedForLearner) ||
		strings.Contains(err.Error(), "rpc not supported for learner"))
}
