package etcdtest

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Maintainer is the maintenance API of the backends that have one (kubeadm, external).
type Maintainer interface {
	Observe(ctx context.Context) (*etcd.Snapshot, error)
	Defragment(ctx context.Context, m etcd.Member, safe func(*etcd.Snapshot) error) (etcd.Defragmentation, error)
	DisarmAlarms(ctx context.Context, alarms []etcd.ActiveAlarm, safe func(*etcd.Snapshot) error) error
}

// MaintenanceEnv is a started three-member cluster for RunMaintenance.
type MaintenanceEnv struct {
	// Backend is the backend under test.
	Backend Maintainer
	// Fragment leaves free pages in every member's database: writes, then deletes and a
	// compaction, as the kube-apiserver's do.
	Fragment func(ctx context.Context) error
	// RaiseNoSpace raises NOSPACE for the member on node as etcd's quota check does.
	RaiseNoSpace func(ctx context.Context, node string) error
}

// RunMaintenance checks a backend's maintenance calls on real etcd: Defragment defragments the
// named member and no other, and not when the safety check on the observation made right before
// refuses; DisarmAlarms disarms NOSPACE.
func RunMaintenance(t *testing.T, env MaintenanceEnv) {
	g := NewWithT(t)
	ctx := caseContext(t)
	g.Expect(env.Fragment(ctx)).To(Succeed())
	var s *etcd.Snapshot
	g.Eventually(func(g Gomega) {
		var err error
		s, err = env.Backend.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		for _, ev := range s.Evidence {
			g.Expect(ev.Status).NotTo(BeNil(), ev.Error)
			g.Expect(ev.Status.DBSize-ev.Status.DBSizeInUse).To(BeNumerically(">", 1<<20), "free pages of member %x", ev.MemberID)
		}
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	var follower etcd.Member
	for _, m := range s.Members {
		if m.ID != s.LeaderID {
			follower = m
		}
	}

	refused := errors.New("not safe")
	_, err := env.Backend.Defragment(ctx, follower, func(*etcd.Snapshot) error { return refused })
	g.Expect(err).To(MatchError(refused))

	var checked *etcd.Snapshot
	d, err := env.Backend.Defragment(ctx, follower, func(fresh *etcd.Snapshot) error { checked = fresh; return nil })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(checked).NotTo(BeNil())
	g.Expect(checked.ObservedAt).To(BeTemporally(">", s.ObservedAt), "the safety check runs on an observation made right before")
	g.Expect(d.Member.ID).To(Equal(follower.ID))
	g.Expect(d.After).NotTo(BeNil())
	g.Expect(d.After.DBSize).To(BeNumerically("<", d.Before.DBSize))

	after, err := env.Backend.Observe(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, ev := range after.Evidence {
		if ev.MemberID != follower.ID {
			g.Expect(ev.Status.DBSize-ev.Status.DBSizeInUse).To(BeNumerically(">", 1<<20), "member %x was defragmented too", ev.MemberID)
		}
	}

	g.Expect(env.RaiseNoSpace(ctx, follower.NodeName)).To(Succeed())
	g.Eventually(func(g Gomega) {
		s, err = env.Backend.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Alarms).To(ContainElement(etcd.ActiveAlarm{MemberID: follower.ID, Alarm: etcd.AlarmNoSpace}))
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Expect(env.Backend.DisarmAlarms(ctx, s.Alarms, func(*etcd.Snapshot) error { return nil })).To(Succeed())
	g.Eventually(func(g Gomega) {
		s, err = env.Backend.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Alarms).To(BeEmpty())
	}).WithTimeout(time.Minute).Should(Succeed())
}
