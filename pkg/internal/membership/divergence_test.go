package membership_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership/membershiptest"
)

// TestDecide_divergences runs the shared cases on the core alone, members placed by ID;
// pkg/kubeadm and pkg/external run them through their own observations.
func TestDecide_divergences(t *testing.T) {
	whereAsked := func(id uint64) string { return fmt.Sprint(id) }
	for _, tc := range membershiptest.Divergences() {
		t.Run(tc.Name, func(t *testing.T) {
			g := NewWithT(t)
			mem := membershiptest.Memory(g, tc)
			v, err := mem.Decide(membershiptest.Answers(tc, whereAsked, func(id uint64) etcd.Member { return etcd.Member{ID: id} }))
			var s *etcd.Snapshot
			if err == nil {
				s = &etcd.Snapshot{LeaderID: v.LeaderID}
				for _, m := range v.Members {
					m.NodeName = whereAsked(m.ID)
					s.Members = append(s.Members, m)
				}
			}
			membershiptest.Check(g, tc, s, err)
		})
	}
}
