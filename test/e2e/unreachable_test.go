package e2e

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

var _ = Describe("A workload apiserver that stops answering", func() {
	It("turns its status Unknown with the reason, removes nothing, and other clusters' status keeps its pace", func(ctx SpecContext) {
		dead := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		alive := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		dead.expectMembers(ctx, 3)
		alive.expectMembers(ctx, 3)
		before := memberIDs(ctx, dead)

		By("stopping the workload apiserver of one cluster")
		Expect(dead.workload.APIServer.StopServing()).To(Succeed())
		DeferCleanup(dead.workload.APIServer.StartServing)
		Eventually(func(g Gomega) {
			cpe := dead.status(ctx)
			cond := findCondition(cpe, v1alpha1.EtcdClusterHealthyCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionUnknown))
			g.Expect(cond.Reason).To(Equal(v1alpha1.EtcdClusterConnectionDownReason))
			g.Expect(conditionStatus(cpe, v1alpha1.AvailableCondition)).To(Equal(metav1.ConditionUnknown))
			for _, m := range cpe.Status.Members {
				g.Expect(m.Health).To(Equal(v1alpha1.MemberUnknown))
			}
		}, reconcileTimeout).Should(Succeed())

		By("asking to delete a Machine of the unreachable cluster: allowed, with a warning that etcd could not be observed")
		warnings := dryRunDelete(ctx, dead.machines["cp-0"])
		Expect(warnings).To(ContainElement(ContainSubstring("could not be observed")))

		By("breaking a member of the other cluster: its status follows while the first stays unreachable")
		Expect(alive.workload.Etcd.StopMember(ctx, alive.workload.Etcd.MemberOnNode("cp-1").Name())).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(alive.status(ctx).Status.HealthyVoters).To(HaveValue(BeEquivalentTo(2)))
		}, reconcileTimeout).Should(Succeed())
		Expect(memberIDs(ctx, dead)).To(Equal(before), "nothing may be removed from an unreachable cluster")
	}, SpecTimeout(4*time.Minute))
})

// warningCollector keeps the admission warnings the apiserver returned.
type warningCollector struct {
	mu    sync.Mutex
	texts []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

// dryRunDelete deletes the Machine in dry-run mode (admission runs, nothing is deleted), as
// `kubectl delete --dry-run=server` does, and returns the warnings.
func dryRunDelete(ctx context.Context, m *clusterv1.Machine) []string {
	cfg := rest.CopyConfig(mgmt.Config)
	w := &warningCollector{}
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	Expect(dyn.Resource(clusterv1.GroupVersion.WithResource("machines")).Namespace(m.Namespace).
		Delete(ctx, m.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})).To(Succeed())
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.texts
}

func findCondition(cpe *v1alpha1.ControlPlaneEtcd, t string) *metav1.Condition {
	for i := range cpe.Status.Conditions {
		if cpe.Status.Conditions[i].Type == t {
			return &cpe.Status.Conditions[i]
		}
	}
	return nil
}
