package k3s

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func Test_assessNode(t *testing.T) {
	const member = "cp-0-1a2b3c4d"
	fresh := testNow.Add(-time.Minute)
	staleAfter := DefaultHeartbeatInterval + DefaultTick + DefaultClockSkew
	tests := []struct {
		name      string
		node      *corev1.Node
		noMember  bool
		contact   etcd.Contact
		learner   bool
		errors    []string
		errSubstr string
	}{
		{
			name:    "A healthy voter answered",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonMemberNotLearner, "Node is a voting member of the etcd cluster", fresh)),
			contact: etcd.ContactAnswered,
		},
		{
			name:    "A learner is a learner waiting to be promoted",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonMemberIsLearner, "Node has not been promoted", fresh)),
			contact: etcd.ContactAnswered, learner: true,
		},
		{
			name:    "Unhealthy with status errors passes K3s's own message through",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonUnhealthy, "etcd member has status errors: NOSPACE", fresh)),
			contact: etcd.ContactAnswered, errors: []string{"etcd member has status errors: NOSPACE"},
		},
		{
			name:    "Unhealthy because K3s's status check failed is a member not answering, with K3s's message",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonUnhealthy, "failed to check etcd member status: context deadline exceeded", fresh)),
			contact: etcd.ContactUnreachable, errSubstr: "failed to check etcd member status: context deadline exceeded",
		},
		{
			name:     "NotAMember means the Node hosts no member",
			node:     etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonNotAMember, "Node is not a member of the etcd cluster", fresh)),
			noMember: true,
		},
		{
			name:     "A Node without node-name hosts no member",
			node:     etcdNodeObj("cp-0", "v1.33.4+k3s1", ""),
			noMember: true,
		},
		{
			name:    "A stale heartbeat is unknown, saying K3s stopped reporting",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonMemberNotLearner, "", testNow.Add(-6*time.Minute))),
			contact: etcd.ContactUnknown, errSubstr: "stopped reporting",
		},
		{
			name:    "A status that is neither True nor False is unknown, never healthy",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonMemberNotLearner, "", fresh), status(corev1.ConditionUnknown)),
			contact: etcd.ContactUnknown, errSubstr: `status "Unknown"`,
		},
		{
			name:    "A status that does not go with the reason is unknown",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonMemberIsLearner, "", fresh), status(corev1.ConditionTrue)),
			contact: etcd.ContactUnknown, errSubstr: "K3s writes that reason only with status False",
		},
		{
			name:    "A heartbeat far in the future (beyond the clock skew) is not believed",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonMemberNotLearner, "", testNow.Add(time.Hour))),
			contact: etcd.ContactUnknown, errSubstr: "in the future",
		},
		{
			name:    "A heartbeat a little in the future (within the clock skew) is believed",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonMemberNotLearner, "", testNow.Add(10*time.Second))),
			contact: etcd.ContactAnswered,
		},
		{
			name:    "A node-address that is not an IP is unknown: K3s cannot tie the condition to the member",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonMemberNotLearner, "", fresh), annotate(k3sKeys.NodeAddress, "cp-0.example.com")),
			contact: etcd.ContactUnknown, errSubstr: "not an IP address",
		},
		{
			name:    "EtcdIsVoter on 1.25.16 (backport) without health is read as voter, health unknown",
			node:    etcdNodeObj("cp-0", "v1.25.16+k3s1", member, voter(ReasonMemberNotLearner, "", fresh)),
			contact: etcd.ContactUnknown, errSubstr: "checks no member health",
		},
		{
			name:    "A stale NotAMember is not trusted either",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonNotAMember, "", testNow.Add(-6*time.Minute))),
			contact: etcd.ContactUnknown, errSubstr: "stopped reporting",
		},
		{
			name:    "K3s before EtcdIsVoter is unknown, saying the version is too old",
			node:    etcdNodeObj("cp-0", "v1.26.5+k3s1", member),
			contact: etcd.ContactUnknown, errSubstr: "writes no EtcdIsVoter condition",
		},
		{
			name:    "K3s with EtcdIsVoter but no health check is unknown",
			node:    etcdNodeObj("cp-0", "v1.28.4+k3s1", "cp-0-aaaabbbb", voter(ReasonMemberNotLearner, "", fresh)),
			contact: etcd.ContactUnknown, errSubstr: "checks no member health",
		},
		{
			name:    "A missing condition is unknown",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member),
			contact: etcd.ContactUnknown, errSubstr: "no EtcdIsVoter condition yet",
		},
		{
			name:    "A kubelet version that is not K3s is unknown",
			node:    etcdNodeObj("cp-0", "v1.33.4", member, voter(ReasonMemberNotLearner, "", fresh)),
			contact: etcd.ContactUnknown, errSubstr: "not a K3s",
		},
		{
			name:    "An unknown reason is unknown",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter("SomethingNew", "", fresh)),
			contact: etcd.ContactUnknown, errSubstr: "does not know",
		},
		{
			name:    "A Node that went NotReady after K3s's last report is unknown",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonMemberNotLearner, "", fresh), ready(corev1.ConditionUnknown, fresh.Add(time.Second))),
			contact: etcd.ContactUnknown, errSubstr: "its health since then is unknown",
		},
		{
			name:    "A Node NotReady before K3s's last report is as K3s says",
			node:    etcdNodeObj("cp-0", "v1.33.4+k3s1", member, voter(ReasonMemberNotLearner, "", fresh), ready(corev1.ConditionFalse, fresh.Add(-time.Second))),
			contact: etcd.ContactAnswered,
		},
		{
			name:    "Before 1.29.3 a member name without the Node prefix is unknown",
			node:    etcdNodeObj("cp-0", "v1.29.1+k3s1", "other-1a2b3c4d", voter(ReasonMemberNotLearner, "", fresh)),
			contact: etcd.ContactUnknown, errSubstr: "prefix",
		},
		{
			name:    "RKE2 is read with its own keys",
			node:    etcdNodeObj("cp-0", "v1.32.10+rke2r1", member, voter(ReasonMemberNotLearner, "", fresh)),
			contact: etcd.ContactAnswered,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			e := readNode(tt.node)
			r := assessNode(e, rulesOf([]etcdNode{e}), clock{now: testNow, staleAfter: staleAfter, skew: DefaultClockSkew})
			if tt.noMember {
				g.Expect(r.member).To(BeNil())
				return
			}
			g.Expect(r.member).ToNot(BeNil())
			g.Expect(r.member.NodeName).To(Equal("cp-0"))
			g.Expect(r.member.ID).To(Equal(MemberID(r.member.Name)))
			g.Expect(r.member.IsLearner).To(Equal(tt.learner))
			g.Expect(r.evidence.MemberID).To(Equal(r.member.ID))
			g.Expect(r.evidence.Contact).To(Equal(tt.contact), r.evidence.Error)
			g.Expect(r.evidence.Errors).To(Equal(tt.errors))
			g.Expect(r.evidence.Error).To(ContainSubstring(tt.errSubstr))
			if tt.contact == etcd.ContactAnswered {
				g.Expect(r.evidence.Error).To(BeEmpty())
			}
		})
	}
}

// Test_assessNode_verdicts checks that the pure decisions of pkg/etcd read this backend's
// evidence as intended: unknown is never healthy, and ghosts are declared a blind spot.
func Test_assessNode_verdicts(t *testing.T) {
	g := NewWithT(t)
	fresh := testNow.Add(-time.Minute)
	s := &etcd.Snapshot{Backend: BackendName, BlindSpots: blindSpots, EvidenceTTL: DefaultHeartbeatInterval + DefaultTick + DefaultClockSkew}
	for _, n := range []*corev1.Node{
		etcdNodeObj("cp-0", "v1.33.4+k3s1", "cp-0-00000000", voter(ReasonMemberNotLearner, "", fresh)),
		etcdNodeObj("cp-1", "v1.33.4+k3s1", "cp-1-00000000", voter(ReasonUnhealthy, "etcd member has status errors: NOSPACE", fresh)),
		etcdNodeObj("cp-2", "v1.33.4+k3s1", "cp-2-00000000", voter(ReasonMemberNotLearner, "", testNow.Add(-time.Hour))),
	} {
		e := readNode(n)
		r := assessNode(e, rulesOf([]etcdNode{e}), clock{now: testNow, staleAfter: s.EvidenceTTL, skew: DefaultClockSkew})
		s.Members, s.Evidence = append(s.Members, *r.member), append(s.Evidence, r.evidence)
	}
	got := etcd.AssessMembers(s, testNow)
	g.Expect(got[0].Health).To(Equal(etcd.Healthy))
	g.Expect(got[1].Health).To(Equal(etcd.Unhealthy))
	g.Expect(got[1].Message).To(ContainSubstring("etcd member has status errors: NOSPACE"))
	g.Expect(got[2].Health).To(Equal(etcd.Unknown))
	v := etcd.AssessHealth(etcd.HealthInput{Snapshot: s, Now: testNow, Machines: []etcd.Machine{{Name: "m0", NodeName: "cp-0"}}})
	g.Expect(v.Cluster.Message).To(ContainSubstring("ghost members"))
}

func Test_assessNodes(t *testing.T) {
	fresh := testNow.Add(-time.Minute)
	staleAfter := DefaultHeartbeatInterval + DefaultTick + DefaultClockSkew
	tests := []struct {
		name    string
		version string
		contact etcd.Contact
	}{
		{name: "Before 1.29.3 a Node whose name prefixes another Node's member is unknown", version: "v1.27.10+k3s1", contact: etcd.ContactUnknown},
		{name: "From 1.29.3 K3s matches exactly", version: "v1.29.3+k3s1", contact: etcd.ContactAnswered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			reports := assessNodes([]*corev1.Node{
				etcdNodeObj("cp-0", tt.version, "cp-0-00000000", voter(ReasonMemberIsLearner, "", fresh)),
				etcdNodeObj("cp-0-learner", tt.version, "cp-0-learner-11111111", voter(ReasonMemberIsLearner, "", fresh)),
				etcdNodeObj("worker", tt.version, ""),
			}, clock{now: testNow, staleAfter: staleAfter, skew: DefaultClockSkew})
			g.Expect(reports).To(HaveLen(2), "the Node without a member is left out")
			g.Expect(reports[0].evidence.Contact).To(Equal(tt.contact), reports[0].evidence.Error)
			g.Expect(reports[1].evidence.Contact).To(Equal(etcd.ContactAnswered))
			if tt.contact == etcd.ContactUnknown {
				g.Expect(reports[0].evidence.Error).To(ContainSubstring("cp-0-learner-11111111"))
			}
		})
	}
}

func Test_assessNodes_cluster(t *testing.T) {
	fresh := testNow.Add(-time.Minute)
	c := clock{now: testNow, staleAfter: DefaultHeartbeatInterval + DefaultTick + DefaultClockSkew, skew: DefaultClockSkew}
	t.Run("Mixed versions: a 1.28.4 server may lead, so a 1.30 Node's MemberNotLearner says nothing about health", func(t *testing.T) {
		g := NewWithT(t)
		reports := assessNodes([]*corev1.Node{
			etcdNodeObj("cp-0", "v1.28.4+k3s1", "cp-0-00000000", voter(ReasonMemberNotLearner, "", fresh)),
			etcdNodeObj("cp-1", "v1.30.2+k3s1", "cp-1-00000000", voter(ReasonMemberNotLearner, "", fresh)),
		}, c)
		g.Expect(reports).To(HaveLen(2))
		for _, r := range reports {
			g.Expect(r.evidence.Contact).To(Equal(etcd.ContactUnknown))
			g.Expect(r.evidence.Error).To(ContainSubstring("checks no member health"))
			g.Expect(r.evidence.Error).To(ContainSubstring("the oldest of the etcd servers' versions v1.28.4+k3s1, v1.30.2+k3s1"))
		}
	})
	t.Run("Mixed versions: a server before 1.29.3 matches by prefix, also for a 1.33 Node's condition", func(t *testing.T) {
		g := NewWithT(t)
		reports := assessNodes([]*corev1.Node{
			etcdNodeObj("cp-0", "v1.33.4+k3s1", "cp-0-00000000", voter(ReasonMemberNotLearner, "", fresh)),
			etcdNodeObj("cp-0-x", "v1.29.2+k3s1", "cp-0-x-11111111", voter(ReasonMemberNotLearner, "", fresh)),
		}, c)
		g.Expect(reports[0].evidence.Contact).To(Equal(etcd.ContactUnknown), "cp-0's condition may be about cp-0-x's member")
	})
	t.Run("Two Nodes naming one member: counted once, unknown, the problem names both", func(t *testing.T) {
		g := NewWithT(t)
		reports := assessNodes([]*corev1.Node{
			etcdNodeObj("cp-0", "v1.33.4+k3s1", "cp-0-00000000", voter(ReasonMemberNotLearner, "", fresh)),
			etcdNodeObj("cp-1", "v1.33.4+k3s1", "cp-1-00000000", voter(ReasonMemberNotLearner, "", fresh)),
			etcdNodeObj("cp-9", "v1.33.4+k3s1", "cp-1-00000000", voter(ReasonMemberNotLearner, "", fresh)),
		}, c)
		g.Expect(reports).To(HaveLen(2), "one member, counted once")
		g.Expect(reports[0].evidence.Contact).To(Equal(etcd.ContactAnswered))
		g.Expect(reports[1].member.Name).To(Equal("cp-1-00000000"))
		g.Expect(reports[1].evidence.Contact).To(Equal(etcd.ContactUnknown))
		g.Expect(reports[1].evidence.Error).To(ContainSubstring("2 Nodes (cp-1, cp-9)"))
	})
	t.Run("A version that does not parse on any etcd Node makes every member unknown", func(t *testing.T) {
		g := NewWithT(t)
		reports := assessNodes([]*corev1.Node{
			etcdNodeObj("cp-0", "v1.33.4+k3s1", "cp-0-00000000", voter(ReasonMemberNotLearner, "", fresh)),
			etcdNodeObj("cp-1", "v1.33.4", "cp-1-00000000", voter(ReasonMemberNotLearner, "", fresh)),
		}, c)
		for _, r := range reports {
			g.Expect(r.evidence.Contact).To(Equal(etcd.ContactUnknown))
			g.Expect(r.evidence.Error).To(ContainSubstring("Node cp-1"))
		}
	})
}
