package kubelet_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestKubelet_containerLogs reads the logs the stand-in serves through the apiserver's pods/log,
// as `kubectl logs` does.
func TestKubelet_containerLogs(t *testing.T) {
	g := NewWithT(t)
	k := startKubelet(t, uniqueName("logs"), nil)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: uniqueName("logs")},
		Spec: corev1.PodSpec{
			NodeName:   k.NodeName(),
			Containers: []corev1.Container{{Name: "manager", Image: "registry.example.com/etcd-adapter:v0.1.0"}},
		},
	}
	g.Expect(apiServer.Client.Create(t.Context(), pod)).To(Succeed())
	t.Cleanup(func() { deleteNow(t, pod) })
	k.WriteContainerLog(pod.Namespace, pod.Name, "manager", false, "one\ntwo\nthree\n")
	k.WriteContainerLog(pod.Namespace, pod.Name, "manager", true, "panic: crashed\n")
	cs, err := kubernetes.NewForConfig(apiServer.Config)
	g.Expect(err).NotTo(HaveOccurred())
	logs := func(opts *corev1.PodLogOptions) (string, error) {
		b, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).DoRaw(t.Context())
		return string(b), err
	}

	for _, tc := range []struct {
		name string
		opts *corev1.PodLogOptions
		want string
	}{
		{name: "the whole log", opts: &corev1.PodLogOptions{}, want: "one\ntwo\nthree\n"},
		{name: "the last lines", opts: &corev1.PodLogOptions{TailLines: new(int64(2))}, want: "two\nthree\n"},
		{name: "the previous instance", opts: &corev1.PodLogOptions{Previous: true}, want: "panic: crashed\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := logs(tc.opts)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
	// Note: an error's text comes in the body; DoRaw's error says only "unknown reason".
	t.Run("a container that does not exist", func(t *testing.T) {
		got, err := logs(&corev1.PodLogOptions{Container: "sidecar"})
		g := NewWithT(t)
		g.Expect(err).To(HaveOccurred())
		g.Expect(got).To(ContainSubstring("sidecar"))
	})
	t.Run("no previous instance", func(t *testing.T) {
		other := pod.DeepCopy()
		other.ObjectMeta = metav1.ObjectMeta{Namespace: pod.Namespace, Name: uniqueName("fresh")}
		g := NewWithT(t)
		g.Expect(apiServer.Client.Create(t.Context(), other)).To(Succeed())
		t.Cleanup(func() { deleteNow(t, other) })
		got, err := cs.CoreV1().Pods(other.Namespace).GetLogs(other.Name, &corev1.PodLogOptions{Previous: true}).DoRaw(t.Context())
		g.Expect(err).To(HaveOccurred())
		g.Expect(string(got)).To(And(ContainSubstring("previous terminated container"), ContainSubstring(other.Name)))
	})
}
