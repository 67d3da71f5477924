package docs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/docblock"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

const (
	// managerLabel selects the manager's Pods (config/manager).
	managerLabel = "control-plane"
	// crashed is the last line the crashed manager container wrote.
	crashed = "panic: runtime error: invalid memory address or nil pointer dereference"
	// probeFailed is the kubelet's Event of a failing readiness probe.
	probeFailed = "Readiness probe failed: HTTP probe failed with statuscode: 500"
)

// testManagerDown runs runbooks.md's block for a manager that is down (describe the Pods, their
// logs, the last crash's log) against two manager Pods on a Node served by the kubelet
// stand-in, which serves their logs to the apiserver's pods/log as a kubelet does: one Pod
// restarted after an OOMKill, with a readiness probe failing (the kubelet's Event) and a log
// longer than the block's --tail.
func testManagerDown(t *testing.T, cfg *rest.Config, c client.Client, sh *docblock.Shell) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := kubelet.Start(ctx, kubelet.Options{NodeName: "management-0", Config: cfg})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(k.Stop()).To(Succeed()) })
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}); !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	crashing, other := managerPod(g, c, k, "7d9c8b6f5-x2x4q"), managerPod(g, c, k, "7d9c8b6f5-p8k2m")
	var log []string
	for i := 1; i <= 150; i++ {
		log = append(log, fmt.Sprintf("I1128 02:%02d:00.000000 1 controller.go:1 \"pass %d\"", i%60, i))
	}
	k.SetLog(managerNamespace, crashing.Name, "manager", strings.Join(log, "\n")+"\n", "I1128 01:00:00.000000 1 main.go:1 \"starting\"\n"+crashed+"\n")
	k.SetLog(managerNamespace, other.Name, "manager", "I1128 02:00:00.000000 1 leaderelection.go:1 \"attempting to acquire leader lease\"\n", "")

	// What the kubelet reports of a restart after an OOMKill, and its Event of a failing probe.
	crashing.Status.ContainerStatuses[0].RestartCount = 1
	crashing.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
	g.Expect(c.Status().Update(ctx, crashing)).To(Succeed())
	recorder(t, g, cfg, c.Scheme(), corev1.EventSource{Component: "kubelet", Host: k.NodeName()}).
		Event(crashing, corev1.EventTypeWarning, "Unhealthy", probeFailed)

	block := shellBlock(g, "runbooks.md", "logs <pod> --previous")
	g.Eventually(func(g Gomega) {
		out := sh.Run(g, "", fill(block, map[string]string{"<pod>": crashing.Name}))
		// describe: both Pods, the OOMKill and the probe's Event.
		g.Expect(out).To(MatchRegexp(`(?m)^Name: +` + crashing.Name + `$`))
		g.Expect(out).To(MatchRegexp(`(?m)^Name: +` + other.Name + `$`))
		g.Expect(out).To(MatchRegexp(`Last State: +Terminated\n +Reason: +OOMKilled`))
		g.Expect(out).To(MatchRegexp(`Warning +Unhealthy +.* ` + probeFailed))
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		// logs -l --prefix --tail=100: the last 100 lines of each Pod, each line naming its Pod.
		g.Expect(prefixed(lines, crashing.Name)).To(Equal(log[50:]))
		g.Expect(prefixed(lines, other.Name)).To(HaveExactElements(ContainSubstring("attempting to acquire leader lease")))
		// logs --previous: the crashed container's log ends the output.
		g.Expect(lines[len(lines)-1]).To(Equal(crashed))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// managerPod creates a manager Pod on the kubelet stand-in's Node and waits until the stand-in
// reports it Running.
func managerPod(g Gomega, c client.Client, k *kubelet.Kubelet, suffix string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: managerNamespace, Name: managerDeployment + "-" + suffix,
			Labels: map[string]string{managerLabel: managerDeployment},
		},
		Spec: corev1.PodSpec{
			NodeName:   k.NodeName(),
			Containers: []corev1.Container{{Name: "manager", Image: "registry.example.com/etcd-adapter:v0.1.0"}},
		},
	}
	g.Expect(c.Create(context.Background(), pod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(pod.Status.ContainerStatuses).To(HaveLen(1))
	}).WithTimeout(time.Minute).Should(Succeed())
	return pod
}

// prefixed returns the lines kubectl logs --prefix gave for the manager container of a Pod,
// without the prefix.
func prefixed(lines []string, pod string) []string {
	var out []string
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, "[pod/"+pod+"/manager] "); ok {
			out = append(out, rest)
		}
	}
	return out
}
