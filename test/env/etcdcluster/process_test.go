package etcdcluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// etcdBinary is the etcd binary of BinaryEnvVar, else the test environment's.
func etcdBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv(BinaryEnvVar); b != "" {
		return b
	}
	dir, err := env.AssetsDir()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return filepath.Join(dir, "etcd")
}

func TestStart_processes(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Members: Nodes("proc", 3), Binary: etcdBinary(t)})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(c.Close()).To(Succeed()) })

	for _, m := range c.Members() {
		g.Expect(m.Etcd()).To(BeNil(), "%s runs as a process, not embedded", m.Name())
		g.Expect(m.Running()).To(BeTrue())
		g.Expect(m.ID()).NotTo(BeZero())
	}
	list, err := c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(HaveLen(3))
	var leader *Member
	g.Eventually(func() (err error) { leader, err = c.Leader(); return err }).WithTimeout(30 * time.Second).Should(Succeed())

	// A SIGKILLed leader is not running; the others elect another leader and keep serving.
	g.Expect(leader.Kill()).To(Succeed())
	g.Expect(leader.Running()).To(BeFalse())
	g.Eventually(func() (*Member, error) { return c.Leader() }).WithTimeout(30 * time.Second).
		Should(SatisfyAll(Not(BeNil()), Not(Equal(leader))))
	g.Expect(leader.Restart(ctx)).To(Succeed())
	g.Expect(leader.Running()).To(BeTrue())

	// A learner joins as a process and is promoted.
	l, err := c.AddLearner(ctx, MemberSpec{NodeName: "proc-3"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.isVoter()).To(BeFalse(), "a learner is not a voter")
	g.Expect(c.PromoteMember(ctx, l.Name())).To(Succeed())
	g.Eventually(l.isVoter).WithTimeout(30 * time.Second).Should(BeTrue())
	list, err = c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(HaveLen(4))
}

func TestStart_processOfAnotherVersionFails(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(VersionEnvVar, "0.0.1")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := Start(ctx, Options{Members: Nodes("wrongversion", 1), Binary: etcdBinary(t)})
	g.Expect(err).To(MatchError(ContainSubstring("not 0.0.1")))
}

func TestStart_missingBinaryFails(t *testing.T) {
	g := NewWithT(t)
	_, err := Start(t.Context(), Options{Members: Nodes("nobinary", 1), Binary: filepath.Join(t.TempDir(), "etcd")})
	g.Expect(err).To(MatchError(ContainSubstring("is not an executable file")))
}
