package env

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAPIServer_StopServingAndStartServing checks the "stop and restart the workload apiserver"
// fault: the apiserver refuses connections while stopped, stops quickly even with a watch open,
// and comes back on the same URL with its data, reachable through a kubeconfig written before
// the restart.
func TestAPIServer_StopServingAndStartServing(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	start := time.Now()
	s, err := StartAPIServer(APIServerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(s.Stop()).To(Succeed()) })
	t.Logf("Started a bare apiserver in %s", time.Since(start).Round(time.Millisecond))

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "kept"}}
	g.Expect(s.Client.Create(ctx, cm)).To(Succeed())
	kubeconfig, err := kubeconfigFor("restarted", s.Config)
	g.Expect(err).NotTo(HaveOccurred())
	watcher, err := client.NewWithWatch(s.Config, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := watcher.Watch(ctx, &corev1.ConfigMapList{})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	url := s.URL()

	stopStart := time.Now()
	g.Expect(s.StopServing()).To(Succeed())
	t.Logf("Stopped kube-apiserver (one watch open) in %s", time.Since(stopStart).Round(time.Millisecond))
	g.Expect(time.Since(stopStart)).To(BeNumerically("<", 15*time.Second), "open watches must not hold the shutdown")
	g.Expect(s.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).
		To(MatchError(ContainSubstring("connection refused")))

	restart := time.Now()
	g.Expect(s.StartServing()).To(Succeed())
	t.Logf("Restarted kube-apiserver in %s", time.Since(restart).Round(time.Millisecond))
	g.Expect(s.URL()).To(Equal(url), "the restarted apiserver must keep its URL")
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	fromKubeconfig, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		return fromKubeconfig.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	}, 30*time.Second).Should(Succeed(), "the old kubeconfig must reach the restarted apiserver and its data")
}
