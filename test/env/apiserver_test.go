package env

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

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
	url := s.URL()

	g.Expect(s.StopServing()).To(Succeed())
	g.Expect(s.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).
		To(MatchError(ContainSubstring("connection refused")))

	g.Expect(s.StartServing()).To(Succeed())
	g.Expect(s.URL()).To(Equal(url), "the restarted apiserver must keep its URL")
	// The same client (same CA, same client certificate) reaches the restarted apiserver, and
	// the data etcd kept is still there.
	g.Eventually(func() error {
		return s.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	}, 30*time.Second).Should(Succeed())
}
