package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// TestRun plays the demo non-interactively and checks that its story happened: both control
// planes healthy in the kubectl table, a failed member reported, the unsafe deletion refused
// naming the failed member, and the K3s Machine deletion going drain → member removal → hook
// release → Machine gone, in that order.
func TestRun(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out bytes.Buffer
	story, err := Run(ctx, Options{Out: &out, Kubeconfig: filepath.Join(t.TempDir(), "kubeconfig")})
	t.Log("\n" + out.String())
	g.Expect(err).NotTo(HaveOccurred())
	fmt.Printf("demo: playground up in %s, story in %s\n", story.SetupTime.Round(100*time.Millisecond), story.Total.Round(100*time.Millisecond))

	g.Expect(story.Steps).To(HaveLen(5))
	g.Expect(story.Tables).To(HaveLen(5))
	g.Expect(story.Tables[0]).To(MatchRegexp(`(?m)^NAMESPACE\s+NAME\s+CLUSTER\s+BACKEND\s+MODE\s+MEMBERS\s+HEALTHY\s+LEADER\s+FAULT TOLERANCE\s+AVAILABLE\s+PROGRESSING\s+AGE$`))
	g.Expect(story.Tables[0]).To(MatchRegexp(`(?m)^demo\s+k3s\s+k3s\s+k3s\s+Manage\s+3\s+3\s+(\S+\s+)?1\s+True\s+False\s+\S+$`))
	g.Expect(story.Tables[0]).To(MatchRegexp(`(?m)^demo\s+kubeadm\s+kubeadm\s+kubeadm\s+\S+\s+3\s+3\s+\S+\s+1\s+True\s+False\s+\S+$`))

	g.Expect(story.FailedMember.Health).NotTo(Equal(v1alpha1.MemberHealthy))
	g.Expect(story.Tables[1]).To(MatchRegexp(`(?m)^demo\s+kubeadm\s+kubeadm\s+kubeadm\s+\S+\s+3\s+2\s+\S+\s+0\s+True\s+\S+\s+\S+$`))

	g.Expect(story.Refusal).To(ContainSubstring("would lose etcd quorum"))
	g.Expect(story.Refusal).To(ContainSubstring(story.FailedMember.Name))

	g.Expect(story.Tables[3]).To(MatchRegexp(`(?m)^demo\s+kubeadm\s+kubeadm\s+kubeadm\s+\S+\s+3\s+3\s+`))

	order := make([]string, 0, len(story.Deletion))
	for _, m := range story.Deletion {
		order = append(order, m.What)
	}
	g.Expect(order).To(ContainElements(MilestoneDraining, MilestonePodEvicted, MilestoneWaitingForHook, MilestoneMemberRemoved, MilestoneHookReleased, MilestoneMachineGone))
	before := func(a, b string) {
		t.Helper()
		g.Expect(slices.Index(order, a)).To(BeNumerically("<", slices.Index(order, b)), "%q must happen before %q: %v", a, b, order)
	}
	before(MilestoneDraining, MilestoneWaitingForHook)
	before(MilestonePodEvicted, MilestoneMemberRemoved)
	before(MilestoneWaitingForHook, MilestoneMemberRemoved)
	before(MilestoneMemberRemoved, MilestoneHookReleased)
	before(MilestoneHookReleased, MilestoneMachineGone)
	g.Expect(story.Removal).NotTo(BeNil())
	g.Expect(story.Removal.Result).To(Equal(v1alpha1.RemovalRemoved))
	// K3s shows no etcd member IDs: the member is told by name and Node, never by the ID pkg/k3s
	// keys it with, which is not the one etcd gave it.
	g.Expect(story.Removal.MemberID).To(BeEmpty())
	g.Expect(story.Events).To(ContainElement(ContainSubstring("etcd member " + story.Removal.Member + " of Node " + story.Removal.NodeName)))
	g.Expect(story.Events).NotTo(ContainElement(ContainSubstring(fmt.Sprintf("%x", k3s.MemberID(story.Removal.Member)))))
	g.Expect(story.Tables[4]).To(MatchRegexp(`(?m)^demo\s+k3s\s+k3s\s+k3s\s+Manage\s+2\s+2\s+`))
}
