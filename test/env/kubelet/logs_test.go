package kubelet_test

import (
	"io"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// TestKubelet_SetLog reads a container's log through the apiserver's pods/log, as kubectl logs
// does: the current log, its last lines (tailLines), the previous instance's (previous), and the
// kubelet's refusal of previous for a container with none and of a container not in the Pod.
func TestKubelet_SetLog(t *testing.T) {
	g := NewWithT(t)
	k := startKubelet(t, uniqueName("logs"), nil)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, GenerateName: "logs-"},
		Spec: corev1.PodSpec{
			NodeName:   k.NodeName(),
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}, {Name: "quiet", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	g.Expect(apiServer.Client.Create(t.Context(), pod)).To(Succeed())
	k.SetLog(pod.Namespace, pod.Name, "c", "one\ntwo\nthree\n", "crashed\n")
	cs, err := kubernetes.NewForConfig(apiServer.Config)
	g.Expect(err).NotTo(HaveOccurred())
	// Stream is how kubectl logs reads (k8s.io/kubectl pkg/cmd/logs/logs.go DefaultConsumeRequest).
	logs := func(opts *corev1.PodLogOptions) (string, error) {
		r, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).Stream(t.Context())
		if err != nil {
			return "", err
		}
		defer func() { _ = r.Close() }()
		b, err := io.ReadAll(r)
		return string(b), err
	}

	g.Eventually(func() (string, error) { return logs(&corev1.PodLogOptions{Container: "c"}) }, 10*time.Second).
		Should(Equal("one\ntwo\nthree\n"))
	g.Expect(logs(&corev1.PodLogOptions{Container: "c", TailLines: ptr.To[int64](2)})).To(Equal("two\nthree\n"))
	g.Expect(logs(&corev1.PodLogOptions{Container: "c", Previous: true})).To(Equal("crashed\n"))
	g.Expect(logs(&corev1.PodLogOptions{Container: "quiet"})).To(BeEmpty())
	_, err = logs(&corev1.PodLogOptions{Container: "quiet", Previous: true})
	g.Expect(err).To(MatchError(ContainSubstring(`previous terminated container "quiet"`)))
}
