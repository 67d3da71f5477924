package docs_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/docblock"
)

// The diagnosed Cluster: a K3s ControlPlaneEtcd whose removal of cp-1's member is blocked
// because cp-2's member is unhealthy, as etcd-adapter's manager reports it. No manager runs
// here: the test writes the status (through the status subresource, as the manager does) and
// records the Event with client-go's recorder (the manager's), then runs the blocks the pages
// give for reading them.
const (
	diagNamespace = "team-d"
	diagCluster   = "delta"
	diagMachine   = "delta-cp-1"
	diagNode      = "delta-cp-1-node"
	diagMember    = "delta-cp-1-node-0a1b2c3d"
	// diagBlocked is the Progressing message, in the form runbooks.md's table gives.
	diagBlocked = "Removing etcd member " + diagMember + " of Machine " + diagMachine +
		" is not safe now (WouldLoseQuorum): 1 of 2 voters left would be healthy"
	// diagEvent is the message of the Event the manager records on the Machine.
	diagEvent = "Removing the etcd member of Machine " + diagMachine + " would lose quorum"
)

// testDiagnose runs the read-only blocks of operations.md (reading the status) and runbooks.md
// (a Machine deletion stuck at the hook; a removal that ended Rejected or TimedOut) against the
// objects above and checks each shows what the page has it for.
func testDiagnose(t *testing.T, cfg *rest.Config, sh *docblock.Shell) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := typedClient(g, cfg)
	createDiagnosed(ctx, g, c)
	recordEvent(t, g, cfg, c)
	placeholders := map[string]string{"<ns>": diagNamespace, "<cluster>": diagCluster, "<machine>": diagMachine}

	t.Run("reading the status (operations)", func(t *testing.T) {
		g := NewWithT(t)
		block := shellBlock(g, "operations.md", "kubectl describe machine")
		// The Event reaches the apiserver asynchronously (the recorder's broadcaster).
		g.Eventually(func(g Gomega) {
			out := sh.Run(g, "", fill(block, placeholders))
			// kubectl get: the printer columns of the ControlPlaneEtcd.
			g.Expect(out).To(MatchRegexp(`(?m)^NAMESPACE +NAME +CLUSTER +BACKEND +MODE`))
			g.Expect(out).To(MatchRegexp(`(?m)^` + diagNamespace + ` +` + diagCluster + ` +` + diagCluster + ` +k3s +Manage +3 +2\b`))
			// -o yaml: the whole status, condition and removal.
			g.Expect(out).To(ContainSubstring("reason: " + etcdv1.ProgressingRemovalBlockedReason))
			g.Expect(out).To(ContainSubstring("member: " + diagMember))
			g.Expect(out).To(ContainSubstring("result: " + string(etcdv1.RemovalInProgress)))
			// describe machine: the Event etcd-adapter recorded on it.
			g.Expect(out).To(MatchRegexp(`Warning +` + etcdv1.EventMemberRemovalBlocked + ` +.*` + diagEvent))
		}).WithTimeout(time.Minute).Should(Succeed())
	})

	t.Run("a deletion stuck at the hook (runbooks)", func(t *testing.T) {
		g := NewWithT(t)
		block := shellBlock(g, "runbooks.md", "kubectl events -n <ns> --for machine/<machine>")
		g.Eventually(func(g Gomega) {
			lines := strings.SplitN(sh.Run(g, "", fill(block, placeholders)), "\n", 3)
			g.Expect(lines).To(HaveLen(3))
			g.Expect(lines[0]).To(Equal(etcdv1.ProgressingRemovalBlockedReason+": "+diagBlocked), "the Progressing reason and message")
			removal := etcdv1.MemberRemovalStatus{}
			g.Expect(json.Unmarshal([]byte(lines[1]), &removal)).To(Succeed(), "status.removal: %s", lines[1])
			g.Expect(removal.Member).To(Equal(diagMember))
			g.Expect(removal.MachineName).To(Equal(diagMachine))
			g.Expect(removal.Result).To(Equal(etcdv1.RemovalInProgress))
			g.Expect(lines[2]).To(MatchRegexp(`Warning +` + etcdv1.EventMemberRemovalBlocked + ` +Machine/` + diagMachine + ` +` + diagEvent))
		}).WithTimeout(time.Minute).Should(Succeed())
	})

	t.Run("members and the K3s Node (runbooks)", func(t *testing.T) {
		testMembers(t, sh, placeholders)
	})
}

// testMembers runs runbooks.md's members block: status.members from the management cluster,
// and the Node's annotations from a workload apiserver of its own, through the kubeconfig file
// the block names.
func testMembers(t *testing.T, sh *docblock.Shell, placeholders map[string]string) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	workload, err := env.StartAPIServer(env.WorkloadAPIServerOptions())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(workload.Stop()).To(Succeed()) })
	keys := k3s.KeysFor("k3s")
	annotations := map[string]string{keys.NodeName: diagMember, keys.NodeAddress: "10.0.0.11", keys.Remove: "true"}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: diagNode, Annotations: annotations, Labels: map[string]string{k3s.EtcdRoleLabel: "true"},
	}}
	g.Expect(workload.Client.Create(ctx, node)).To(Succeed())
	// A directory of its own: t.TempDir's name holds the subtest's, parentheses included.
	dir, err := os.MkdirTemp("", "workload")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(os.RemoveAll(dir)).To(Succeed()) })
	kubeconfig := filepath.Join(dir, "kubeconfig")
	g.Expect(docblock.WriteKubeconfig(workload.Config, kubeconfig)).To(Succeed())

	values := map[string]string{"<workload>": kubeconfig, "<node>": diagNode}
	for k, v := range placeholders {
		values[k] = v
	}
	block := shellBlock(g, "runbooks.md", "status.members[*]")
	lines := strings.Split(strings.TrimSuffix(sh.Run(g, "", fill(block, values)), "\n"), "\n")
	g.Expect(lines).To(HaveLen(4), "three members, then the Node's annotations")
	g.Expect(lines[:3]).To(HaveExactElements(
		"delta-cp-0-node-1a2b3c4d Healthy ",
		diagMember+" Healthy ",
		"delta-cp-2-node-2b3c4d5e Unhealthy K3s reports the member unhealthy: context deadline exceeded",
	), "each member's name, health and message")
	got := map[string]string{}
	g.Expect(json.Unmarshal([]byte(lines[3]), &got)).To(Succeed(), "the Node's annotations: %s", lines[3])
	g.Expect(got).To(Equal(annotations), "the workload Node's etcd annotations, not a management object's")
}

// typedClient is a client of the test apiserver that knows etcd-adapter's types.
func typedClient(g Gomega, cfg *rest.Config) client.Client {
	s := env.Scheme()
	utilruntime.Must(etcdv1.AddToScheme(s))
	c, err := client.New(cfg, client.Options{Scheme: s})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// createDiagnosed creates the ControlPlaneEtcd and the Machine, and writes the status the
// manager would write while cp-1's removal waits for cp-2's member.
func createDiagnosed(ctx context.Context, g Gomega, c client.Client) {
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: diagNamespace}})).To(Succeed())
	g.Expect(c.Create(ctx, machine(diagNamespace, diagMachine, map[string]string{hook: ""}))).To(Succeed())
	cpe := &etcdv1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: diagNamespace, Name: diagCluster},
		Spec:       etcdv1.ControlPlaneEtcdSpec{ClusterName: diagCluster, Backend: etcdv1.BackendK3s, Mode: etcdv1.ModeManage},
	}
	g.Expect(c.Create(ctx, cpe)).To(Succeed())
	now := metav1.Now()
	cpe.Status = etcdv1.ControlPlaneEtcdStatus{
		Conditions: []metav1.Condition{{
			Type: etcdv1.ProgressingCondition, Status: metav1.ConditionTrue, Reason: etcdv1.ProgressingRemovalBlockedReason,
			Message: diagBlocked, LastTransitionTime: now,
		}},
		Members: []etcdv1.EtcdMemberStatus{
			{Name: "delta-cp-0-node-1a2b3c4d", Role: etcdv1.MemberRoleVoter, Health: etcdv1.MemberHealthy},
			{Name: diagMember, NodeName: diagNode, MachineName: diagMachine, Role: etcdv1.MemberRoleVoter, Health: etcdv1.MemberHealthy},
			{
				Name: "delta-cp-2-node-2b3c4d5e", Role: etcdv1.MemberRoleVoter, Health: etcdv1.MemberUnhealthy,
				Message: "K3s reports the member unhealthy: context deadline exceeded",
			},
		},
		MemberCount:   new(int32(3)),
		Voters:        new(int32(3)),
		HealthyVoters: new(int32(2)),
		Removal: &etcdv1.MemberRemovalStatus{
			Member: diagMember, MachineName: diagMachine, NodeName: diagNode, StartTime: now,
			Result: etcdv1.RemovalInProgress, Message: diagBlocked,
		},
	}
	g.Expect(c.Status().Update(ctx, cpe)).To(Succeed())
}

// recordEvent records an Event on the Machine as the manager does when a removal is blocked.
func recordEvent(t *testing.T, g Gomega, cfg *rest.Config, c client.Client) {
	m := &clusterv1.Machine{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: diagNamespace, Name: diagMachine}, m)).To(Succeed())
	record := recorder(t, g, cfg, c.Scheme(), corev1.EventSource{Component: "etcd-adapter-controller"})
	record.Event(m, corev1.EventTypeWarning, etcdv1.EventMemberRemovalBlocked, diagEvent)
}

// recorder is client-go's Event recorder, which the manager (controller-runtime's
// GetEventRecorderFor) and the kubelet use, writing to the test apiserver until the test ends.
func recorder(t *testing.T, g Gomega, cfg *rest.Config, s *runtime.Scheme, source corev1.EventSource) record.EventRecorder {
	cs, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	b := record.NewBroadcaster()
	t.Cleanup(b.Shutdown)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	return b.NewRecorder(s, source)
}
