package k3s

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func TestNew(t *testing.T) {
	g := NewWithT(t)
	_, err := New(Config{})
	g.Expect(err).To(MatchError(etcd.ErrInvalidInput))

	b, err := New(Config{Client: fake.NewClientBuilder().Build()})
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(b.cfg.StaleAfter()).To(Equal(DefaultHeartbeatInterval + DefaultTick + DefaultClockSkew))
	_, err = b.WaitForRemoval(context.Background(), etcd.Member{Name: "cp-0-1a2b3c4d", NodeName: "cp-0"})
	g.Expect(err).To(MatchError(etcd.ErrInvalidInput), "waiting without a watch would be polling")
}

func Test_notifier(t *testing.T) {
	g := NewWithT(t)
	n := newNotifier()
	ch, cancel := n.subscribe("cp-0")
	n.notify("cp-1")
	g.Consistently(ch).ShouldNot(Receive())
	n.notify("cp-0")
	n.notify("cp-0")
	g.Eventually(ch).Should(Receive())
	cancel()
	g.Expect(n.waiters).To(BeEmpty())
}
