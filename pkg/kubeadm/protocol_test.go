package kubeadm

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/discovery"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm/internal/portforward"
	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// TestPortForwardProtocol observes a 3-member cluster through the workload apiserver and checks
// the protocol the port-forwards reached each kubelet in: the kubelet's own WebSocket protocol,
// which the apiserver passes through as it is (k8s.io/kubernetes
// pkg/registry/core/pod/rest/subresources.go, PortForwardREST), on every Kubernetes version of
// docs/compatibility.md. make test-compat runs it on each (env.WorkloadKubeAPIServerEnvVar); an
// apiserver that refused the upgrade would show here as a SPDY fallback, one that broke the
// port-forward as an unobserved cluster.
func TestPortForwardProtocol(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dc, err := discovery.NewDiscoveryClientForConfig(workload.Config)
	g.Expect(err).NotTo(HaveOccurred())
	v, err := dc.ServerVersion()
	g.Expect(err).NotTo(HaveOccurred())
	if want := env.WorkloadAPIServerOptions().KubernetesVersion; want != "" {
		g.Expect(v.GitVersion).To(Equal(want), "the workload apiserver is the version the matrix names")
	}

	w := startWorkloadCluster(t, workload, 3)
	snap, err := w.backend(t).Observe(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snap.Members).To(HaveLen(3))
	g.Expect(snap.Evidence).To(HaveLen(3))
	for _, e := range snap.Evidence {
		g.Expect(e.Contact).To(Equal(etcd.ContactAnswered), "the member on Node %s answered through its port-forward: %s", e.NodeName, e.Error)
	}

	for _, node := range w.nodes {
		protocols := w.kubelet(node).PortForwardProtocols()
		t.Logf("kube-apiserver %s, kubelet %s: port-forwards by protocol %v", v.GitVersion, node, protocols)
		g.Expect(protocols).To(HaveKey("websocket:"+portforward.ChannelProtocol), "kubelet %s", node)
		g.Expect(protocols).To(HaveLen(1), "kubelet %s: no other protocol, no fallback", node)
	}
}
