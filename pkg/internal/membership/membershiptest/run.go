package membershiptest

import (
	"slices"
	"strings"
	"time"

	"github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
)

// Answers are the replies of c as a backend has them: each at the place the backend asks that
// member at (whereAsked), listing members as the backend's members report them (member),
// sorted by place.
func Answers(c Case, whereAsked func(id uint64) string, member func(id uint64) etcd.Member) []membership.Answer {
	out := make([]membership.Answer, 0, len(c.Replies))
	for _, r := range c.Replies {
		ms := make([]etcd.Member, 0, len(r.Members))
		for _, id := range r.Members {
			ms = append(ms, member(id))
		}
		out = append(out, membership.Answer{Where: whereAsked(r.Self), At: time.Now(),
			SelfID: r.Self, ClusterID: r.Cluster, LeaderID: r.Leader, RaftTerm: r.Term, Members: ms})
	}
	slices.SortFunc(out, func(x, y membership.Answer) int { return strings.Compare(x.Where, y.Where) })
	return out
}

// Memory is the backend's memory before the observation of c: empty, or, when c.Known is set,
// that of a backend that observed cluster c.Known before.
func Memory(g gomega.Gomega, c Case) *membership.Memory {
	mem := &membership.Memory{}
	if c.Known != 0 {
		_, err := mem.Decide([]membership.Answer{{Where: "before", SelfID: 100, ClusterID: c.Known, LeaderID: 100, Members: []etcd.Member{{ID: 100}}}})
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	return mem
}

// Check fails g unless the backend's observation of c (its snapshot, or the error it failed
// with) is what c wants; every member of the snapshot must be placed.
func Check(g gomega.Gomega, c Case, s *etcd.Snapshot, err error) {
	if c.WantErr != nil {
		g.Expect(err).To(gomega.MatchError(c.WantErr))
		g.Expect(err.Error()).To(gomega.ContainSubstring(c.WantText))
		return
	}
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(s.LeaderID).To(gomega.Equal(c.WantLeader))
	ids := make([]uint64, 0, len(s.Members))
	for _, m := range s.Members {
		ids = append(ids, m.ID)
		g.Expect(m.NodeName).NotTo(gomega.BeEmpty(), "member %s is placed", m)
	}
	g.Expect(ids).To(gomega.Equal(c.WantMembers))
}
