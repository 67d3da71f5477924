package etcd

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HealthInput is what the health verdicts are computed from.
type HealthInput struct {
	// Snapshot is the latest observation; nil when ObserveErr is set.
	Snapshot *Snapshot
	// ObserveErr is why observing failed, if it did.
	ObserveErr error
	// Machines are the control-plane Machines.
	Machines []Machine
	// MembersOffMachines is true when the members run on no control-plane Machine (an external
	// etcd of a KubeadmControlPlane): a member is then not a ghost for having no Machine, and
	// Machines, which should be left out, would get no member either.
	MembersOffMachines bool
	// Now is the time the verdict is for; evidence older than the snapshot's TTL is not trusted.
	Now time.Time
}

// HealthVerdict is the result of AssessHealth: one EtcdMemberHealthy condition per Machine and
// the EtcdClusterHealthy condition, KCP-compatible in type and reason.
type HealthVerdict struct {
	// Machines maps Machine name to its EtcdMemberHealthy condition.
	Machines map[string]metav1.Condition
	// Cluster is the EtcdClusterHealthy condition.
	Cluster metav1.Condition
	// Members is the per-member classification the verdict is built on; nil when nothing was
	// observed.
	Members []MemberHealth
}

// AssessHealth computes the etcd health conditions for the Machines of one control plane.
func AssessHealth(in HealthInput) HealthVerdict {
	if in.Snapshot == nil {
		return unobservedVerdict(in)
	}
	members := AssessMembers(in.Snapshot, in.Now)
	v := HealthVerdict{Machines: map[string]metav1.Condition{}, Members: members}
	for _, m := range in.Machines {
		v.Machines[m.Name] = machineCondition(in.Snapshot, members, m)
	}
	v.Cluster = clusterCondition(in, v.Machines, members, clusterProblems(in, members))
	return boundMessages(v)
}

// boundMessages cuts every message to what the API accepts (MaxConditionMessageBytes,
// MaxMemberMessageBytes): a status patch with a longer one is refused, and the Cluster's status
// would then stop updating. Backends bound what a workload cluster says; this bounds what many
// members' messages add up to.
func boundMessages(v HealthVerdict) HealthVerdict {
	for name, c := range v.Machines {
		c.Message = Truncate(c.Message, MaxConditionMessageBytes)
		v.Machines[name] = c
	}
	v.Cluster.Message = Truncate(v.Cluster.Message, MaxConditionMessageBytes)
	for i := range v.Members {
		v.Members[i].Message = Truncate(v.Members[i].Message, MaxMemberMessageBytes)
	}
	return v
}

func unobservedVerdict(in HealthInput) HealthVerdict {
	err := in.ObserveErr
	if err == nil {
		err = fmt.Errorf("%w: no snapshot and no error given", ErrInvalidInput)
	}
	reason := ConditionReasonFor(err)
	// The error may quote the workload cluster (errors.Join adds line breaks too): one line,
	// bounded.
	msg := SanitizeText(fmt.Sprintf("Failed to observe etcd: %v", err), MaxConditionMessageBytes)
	v := HealthVerdict{Machines: map[string]metav1.Condition{}}
	for _, m := range in.Machines {
		if m.Deleting {
			v.Machines[m.Name] = deletingCondition()
			continue
		}
		v.Machines[m.Name] = memberCondition(metav1.ConditionUnknown, reason, msg)
	}
	v.Cluster = metav1.Condition{Type: ClusterHealthyCondition, Status: metav1.ConditionUnknown, Reason: reason, Message: msg}
	return v
}

func machineCondition(s *Snapshot, members []MemberHealth, m Machine) metav1.Condition {
	switch {
	case m.Deleting:
		return deletingCondition()
	case m.Provisioning():
		return memberCondition(metav1.ConditionUnknown, MemberInspectionFailedReason, waitingForNodeMessage(m))
	}
	on := membersOnNode(members, m.NodeName)
	if len(on) == 0 {
		return memberCondition(metav1.ConditionFalse, MemberNotHealthyReason,
			fmt.Sprintf("Etcd reports the cluster is composed of %s, but no member is hosted on Node %s of Machine %s", memberNames(s.Members), m.NodeName, m.Name))
	}
	if problems := memberProblems(on); len(problems) > 0 || len(on) > 1 {
		if len(problems) == 0 {
			problems = []string{fmt.Sprintf("Node %s hosts %d etcd members", m.NodeName, len(on))}
		}
		return memberCondition(metav1.ConditionFalse, MemberNotHealthyReason, capitalize(strings.Join(problems, "; ")))
	}
	mh := on[0]
	switch {
	case mh.Health == Unknown:
		return memberCondition(metav1.ConditionUnknown, MemberInspectionFailedReason, capitalize(mh.Message))
	case mh.Health == Unhealthy:
		return memberCondition(metav1.ConditionFalse, MemberNotHealthyReason, capitalize(mh.Message))
	case mh.Member.IsLearner:
		return memberCondition(metav1.ConditionFalse, MemberNotHealthyReason, "Waiting for learner etcd member to be promoted")
	}
	return memberCondition(metav1.ConditionTrue, MemberHealthyReason, "")
}

// memberProblems lists the problems of the members on one Node once each, followed by the health
// of each member that is not healthy, so a person sees which of them is the stale one.
func memberProblems(on []MemberHealth) []string {
	var out []string
	for _, mh := range on {
		for _, p := range mh.Problems {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	for _, mh := range on {
		if mh.Health != Healthy && mh.Message != "" {
			out = append(out, mh.Message)
		}
	}
	return out
}

func waitingForNodeMessage(m Machine) string {
	if m.ProviderID != "" {
		return fmt.Sprintf("Waiting for a Node with spec.providerID %s to exist", m.ProviderID)
	}
	return "Waiting for the Machine to report spec.providerID"
}

func deletingCondition() metav1.Condition {
	return memberCondition(metav1.ConditionFalse, MemberDeletingReason, "Machine is deleting")
}

func memberCondition(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: MemberHealthyCondition, Status: status, Reason: reason, Message: msg}
}

func membersOnNode(members []MemberHealth, nodeName string) []MemberHealth {
	var out []MemberHealth
	for _, mh := range members {
		if nodeName != "" && mh.Member.NodeName == nodeName {
			out = append(out, mh)
		}
	}
	return out
}

// clusterProblems are the cluster-wide findings that no single Machine's condition shows.
func clusterProblems(in HealthInput, members []MemberHealth) []string {
	s := in.Snapshot
	var problems []string
	problems = append(problems, ghostProblems(in, members)...)
	for _, mh := range members {
		for _, p := range mh.Problems {
			if p = capitalize(p); !slices.Contains(problems, p) {
				problems = append(problems, p)
			}
		}
	}
	a := newAgreement(s)
	if a.clusterIDTie || distinctClusterIDs(s) > 1 {
		problems = append(problems, "Members report different cluster IDs (split brain)")
	}
	problems = append(problems, alarmProblems(s)...)
	if a.listsDiffer {
		problems = append(problems, "Members disagree on the member list")
	}
	if s.LeaderID == 0 && !s.Blind(BlindSpotLeader) && len(s.Members) > 0 {
		problems = append(problems, "Etcd has no leader")
	}
	return problems
}

// ghostProblems reports members no Machine accounts for: members that never started, and
// members on no Machine's Node. While a Machine is provisioning its member may not be mapped yet,
// so an unmatched member is only a problem when no Machine is provisioning (as KCP does).
func ghostProblems(in HealthInput, members []MemberHealth) []string {
	provisioning := slices.ContainsFunc(in.Machines, Machine.Provisioning)
	var problems []string
	for _, mh := range members {
		m := mh.Member
		switch {
		case !m.Started():
			problems = append(problems, fmt.Sprintf("Etcd member %x was added but never started", m.ID))
		case !provisioning && !in.MembersOffMachines && !hasMachineOnNode(in.Machines, m.NodeName):
			problems = append(problems, fmt.Sprintf("Etcd member %s has no corresponding Machine", m.Name))
		}
	}
	return problems
}

// alarmProblems states every alarm active on the cluster. etcd's alarms are cluster-wide: NOSPACE
// stops writes on every member, and removing the member that raised it does not clear it (only
// AlarmDisarm does, after compaction and defragmentation).
func alarmProblems(s *Snapshot) []string {
	var out []string
	for _, al := range s.Alarms {
		m, ok := s.MemberByID(al.MemberID)
		switch {
		case ok:
			out = append(out, fmt.Sprintf("Etcd alarm %s is active, raised by member %s", al.Alarm, m))
		default:
			out = append(out, fmt.Sprintf("Etcd alarm %s is active, raised by member %x, which is no longer a member; disarm it once its cause is fixed", al.Alarm, al.MemberID))
		}
	}
	return out
}

func hasMachineOnNode(machines []Machine, nodeName string) bool {
	return nodeName != "" && slices.ContainsFunc(machines, func(m Machine) bool { return m.NodeName == nodeName })
}

func distinctClusterIDs(s *Snapshot) int {
	ids := map[uint64]bool{}
	for _, ev := range answered(s) {
		if ev.ClusterID != 0 {
			ids[ev.ClusterID] = true
		}
	}
	return len(ids)
}

// clusterCondition aggregates Machine conditions and cluster problems: any problem or unhealthy
// member makes it False, otherwise any unknown makes it Unknown. Deleting Machines are expected
// to lose their member and do not count.
func clusterCondition(in HealthInput, machines map[string]metav1.Condition, members []MemberHealth, problems []string) metav1.Condition {
	var notHealthy, unknown []string
	for _, name := range sortedKeys(machines) {
		c := machines[name]
		switch {
		case c.Reason == MemberDeletingReason:
		case c.Status == metav1.ConditionUnknown && startingUp(in.Machines, name):
			// As KCP does: a Machine whose infrastructure has not reported spec.providerID yet
			// is starting up; its member may join before its Node registers, and counting it
			// would make the condition flicker on every scale-up.
		case c.Status == metav1.ConditionFalse:
			notHealthy = append(notHealthy, fmt.Sprintf("Machine %s: %s", name, c.Message))
		case c.Status == metav1.ConditionUnknown:
			unknown = append(unknown, fmt.Sprintf("Machine %s: %s", name, c.Message))
		}
	}
	if in.MembersOffMachines {
		// No Machine condition carries the members' health, so each member counts itself.
		for _, mh := range members {
			switch {
			case mh.Health == Unhealthy:
				notHealthy = append(notHealthy, fmt.Sprintf("Member %s: %s", mh.Member, capitalize(mh.Message)))
			case mh.Health == Unknown:
				unknown = append(unknown, fmt.Sprintf("Member %s: %s", mh.Member, capitalize(mh.Message)))
			case mh.Member.IsLearner:
				notHealthy = append(notHealthy, fmt.Sprintf("Member %s: Waiting for learner etcd member to be promoted", mh.Member))
			}
		}
	}
	cond := metav1.Condition{Type: ClusterHealthyCondition}
	switch {
	case len(problems) > 0 || len(notHealthy) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, ClusterNotHealthyReason
		cond.Message = bullets(append(append(problems, notHealthy...), unknown...))
	case len(unknown) > 0:
		cond.Status, cond.Reason = metav1.ConditionUnknown, ClusterHealthUnknownReason
		cond.Message = bullets(unknown)
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, ClusterHealthyReason
	}
	if blind := blindSpotNote(in.Snapshot); blind != "" {
		cond.Message = strings.TrimSpace(cond.Message + "\n" + blind)
	}
	return cond
}

// startingUp reports whether the named Machine has no Node and no spec.providerID yet.
func startingUp(machines []Machine, name string) bool {
	for _, m := range machines {
		if m.Name == name {
			return m.Provisioning() && m.ProviderID == ""
		}
	}
	return false
}

// blindSpotNote states what the backend cannot see, so a healthy verdict never claims more than
// was checked.
func blindSpotNote(s *Snapshot) string {
	if len(s.BlindSpots) == 0 {
		return ""
	}
	names := make([]string, 0, len(s.BlindSpots))
	for _, b := range s.BlindSpots {
		names = append(names, blindSpotText[b])
	}
	return fmt.Sprintf("Not checked by the %s backend: %s", s.Backend, strings.Join(names, ", "))
}

var blindSpotText = map[BlindSpot]string{
	BlindSpotGhostMembers: "etcd members that no Node hosts (ghost members) are invisible to it",
	BlindSpotMemberLists:  "whether members agree on the member list",
	BlindSpotClusterID:    "whether members agree on the cluster ID",
	BlindSpotAlarms:       "etcd alarms",
	BlindSpotLeader:       "which member leads",
}

func bullets(lines []string) string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, "* "+l)
	}
	return strings.Join(out, "\n")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
