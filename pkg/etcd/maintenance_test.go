package etcd

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const mib = 1 << 20

// sizes gives member id a database of dbSize MiB, inUse MiB of it in use.
func sizes(id uint64, dbSize, inUse int64) func(*Snapshot) {
	return evidence(id, func(ev *MemberEvidence) {
		ev.Status = &MemberStatus{DBSize: dbSize * mib, DBSizeInUse: inUse * mib}
	})
}

// quota makes member id report its quota (etcd v3.6 and later).
func quota(id uint64, q int64) func(*Snapshot) {
	return evidence(id, func(ev *MemberEvidence) { ev.Status.DBSizeQuota = q * mib })
}

// noSpace raises NOSPACE for member id as the backends report it: on the cluster and on the
// member's evidence.
func noSpace(id uint64) func(*Snapshot) {
	return func(s *Snapshot) {
		s.Alarms = append(s.Alarms, ActiveAlarm{MemberID: id, Alarm: AlarmNoSpace})
		evidence(id, func(ev *MemberEvidence) { ev.Alarms = append(ev.Alarms, AlarmNoSpace) })(s)
	}
}

func down(id uint64) func(*Snapshot) {
	return evidence(id, func(ev *MemberEvidence) {
		*ev = MemberEvidence{MemberID: ev.MemberID, NodeName: ev.NodeName, ObservedAt: ev.ObservedAt, Contact: ContactUnreachable, Error: "connection refused"}
	})
}

// sized is cluster(n) where every member has a 10 MiB database, 9 MiB in use.
func sized(n int, edits ...func(*Snapshot)) *Snapshot {
	s := cluster(n)
	for i := range n {
		sizes(uint64(i+1), 10, 9)(s)
	}
	return with(s, edits...)
}

func TestDecideMaintenance(t *testing.T) {
	byBytes := DefragPolicy{FreeBytes: 50 * mib, OnNoSpace: true, Quota: 100 * mib, HeadroomPercent: 20}
	noSpaceOnly := DefragPolicy{OnNoSpace: true, Quota: 100 * mib, HeadroomPercent: 20}
	tests := []struct {
		name       string
		snapshot   *Snapshot
		policy     DefragPolicy
		action     MaintenanceAction
		member     uint64
		candidates []uint64
		reason     string
		message    string
		// defragmented is when members were last defragmented, by ID.
		defragmented map[uint64]time.Time
	}{
		{
			name: "Nothing is known safe when etcd could not be observed", snapshot: nil, policy: byBytes,
			action: MaintenanceBlocked, message: "etcd could not be observed",
		},
		{
			name: "Nothing to do when no member passes the threshold", snapshot: sized(3), policy: byBytes,
			action: MaintenanceNone,
		},
		{
			name: "Defragments the follower whose free pages pass the threshold", snapshot: sized(3, sizes(3, 90, 20)), policy: byBytes,
			action: MaintenanceDefragment, member: 3, reason: DefragReasonFreeSpace, message: "cp-2 has 70.0 MiB free of 90.0 MiB",
		},
		{
			name:     "Defragments a fragmented follower before the fragmented leader, the most fragmented first",
			snapshot: sized(3, sizes(1, 95, 5), sizes(2, 70, 10), sizes(3, 90, 10)), policy: byBytes,
			action: MaintenanceDefragment, member: 3, reason: DefragReasonFreeSpace,
		},
		{
			name:     "Moves leadership off a fragmented leader before defragmenting it, to the least fragmented healthy voter",
			snapshot: sized(3, sizes(1, 95, 5), sizes(2, 40, 5)), policy: byBytes,
			action: MaintenanceMoveLeader, member: 1, candidates: []uint64{3, 2}, reason: DefragReasonFreeSpace,
			message: "cp-0 leads, so leadership moves off it",
		},
		{
			name:     "Does not defragment a member of three while another is down: quorum would rest on one member",
			snapshot: sized(3, sizes(2, 90, 10), down(3)), policy: byBytes,
			reason: DefragReasonFreeSpace, action: MaintenanceBlocked, member: 2, message: "with it blocked, 1 of 3 voters would be healthy and serving",
		},
		{
			name:     "Defragments a member of five while another is down: three of five keep quorum",
			snapshot: sized(5, sizes(2, 90, 10), down(5)), policy: byBytes,
			reason: DefragReasonFreeSpace, action: MaintenanceDefragment, member: 2,
		},
		{
			name:     "Does not defragment while a learner may be promoted and quorum would then rest on too few",
			snapshot: sized(4, learner(4), sizes(2, 90, 10)), policy: byBytes,
			reason: DefragReasonFreeSpace, action: MaintenanceBlocked, member: 2, message: "1 learner(s) may be promoted meanwhile",
		},
		{
			name:     "Both thresholds must be reached",
			snapshot: sized(3, sizes(2, 400, 300)), policy: DefragPolicy{FreeBytes: 50 * mib, FreePercent: 50, Quota: 1024 * mib, HeadroomPercent: 20},
			action: MaintenanceNone,
		},
		{
			name:     "A percent threshold alone defragments",
			snapshot: sized(3, sizes(2, 40, 10)), policy: DefragPolicy{FreePercent: 50, Quota: 1024 * mib, HeadroomPercent: 20},
			reason: DefragReasonFreeSpace, action: MaintenanceDefragment, member: 2, message: "thresholds: 50% free",
		},
		{
			name:     "A member that does not answer with its sizes is not defragmented",
			snapshot: sized(5, down(2)), policy: DefragPolicy{FreePercent: 1, Quota: 1024 * mib, HeadroomPercent: 20},
			reason: DefragReasonFreeSpace, action: MaintenanceDefragment, member: 3,
		},
		{
			name:     "Under NOSPACE, defragments a follower above quota less headroom; the alarmed member still counts as serving",
			snapshot: sized(3, noSpace(2), sizes(1, 100, 30), sizes(2, 100, 30), sizes(3, 100, 30)), policy: noSpaceOnly,
			action: MaintenanceDefragment, member: 2, reason: DefragReasonNoSpace,
			message: "NOSPACE is raised and cp-0 is at 100.0 MiB (30.0 MiB in use) of quota 100.0 MiB, target 80.0 MiB",
		},
		{
			name:     "Under NOSPACE, the leader is defragmented last, after leadership moved off it",
			snapshot: sized(3, noSpace(2), sizes(1, 100, 30)), policy: noSpaceOnly,
			action: MaintenanceMoveLeader, member: 1, candidates: []uint64{2, 3}, reason: DefragReasonNoSpace,
		},
		{
			name:     "Disarms NOSPACE once every member is below its quota less headroom",
			snapshot: sized(3, noSpace(2), sizes(2, 79, 30)), policy: noSpaceOnly,
			action: MaintenanceDisarmNoSpace, message: "every member is below its quota less 20% headroom: cp-0 is at 10.0 MiB",
		},
		{
			name:     "Disarms against the quota a member reports (etcd v3.6) rather than the policy's",
			snapshot: sized(3, noSpace(2), sizes(2, 150, 140), quota(2, 200)), policy: noSpaceOnly,
			action: MaintenanceDisarmNoSpace,
		},
		{
			name:     "Does not defragment under NOSPACE when the data itself is above the target: that needs compaction or a larger quota",
			snapshot: sized(3, noSpace(2), sizes(2, 100, 90)), policy: noSpaceOnly, defragmented: map[uint64]time.Time{2: testNow.Add(-time.Minute)},
			action: MaintenanceBlocked, message: "the data must shrink",
		},
		{
			name:     "Defragments under NOSPACE a member whose reported use is above the target once: etcd updates it only when it commits",
			snapshot: sized(3, noSpace(2), sizes(2, 100, 90)), policy: noSpaceOnly, defragmented: map[uint64]time.Time{2: testNow.Add(-StaleInUseRetryAfter)},
			action: MaintenanceDefragment, member: 2, reason: DefragReasonNoSpace,
		},
		{
			name:     "Does not disarm NOSPACE while a voter's size is unknown",
			snapshot: sized(3, noSpace(2), down(3)), policy: noSpaceOnly,
			action: MaintenanceBlocked, message: "the database size of cp-2 is not known, so it is not disarmed",
		},
		{
			name:     "Ignores NOSPACE when the recovery is turned off, and defragments by threshold only",
			snapshot: sized(3, noSpace(2), sizes(2, 100, 30)), policy: DefragPolicy{Quota: 100 * mib, HeadroomPercent: 20},
			action: MaintenanceNone,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			step := DecideMaintenance(tt.snapshot, testNow, tt.policy, tt.defragmented)
			g.Expect(step.Action).To(Equal(tt.action), step.Message)
			g.Expect(step.Member.ID).To(Equal(tt.member), step.Message)
			g.Expect(step.Reason).To(Equal(tt.reason))
			g.Expect(step.Message).To(ContainSubstring(tt.message))
			var candidates []uint64
			for _, c := range step.Candidates {
				candidates = append(candidates, c.ID)
			}
			g.Expect(candidates).To(Equal(tt.candidates))
			if tt.action == MaintenanceDefragment {
				want := tt.snapshot.Evidence[tt.member-1].Status
				g.Expect(step.Before).To(Equal(*want))
			}
			if tt.action == MaintenanceDisarmNoSpace {
				g.Expect(step.Alarms).To(Equal(tt.snapshot.Alarms))
			}
		})
	}
}
