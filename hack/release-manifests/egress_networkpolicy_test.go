package main

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// TestEgressNetworkPolicy builds config/network-policy and checks that its NetworkPolicy selects
// the components' manager Pods, restricts their egress only, and allows exactly DNS, the
// apiservers' ports and the etcd client port; a real apiserver accepts it.
func TestEgressNetworkPolicy(t *testing.T) {
	g := NewWithT(t)
	objs := decodeAll(g, filepath.Join("..", "..", "config", "network-policy"))
	g.Expect(objs).To(HaveLen(1))
	np := &networkingv1.NetworkPolicy{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, np)).To(Succeed())
	g.Expect(np.Namespace).To(Equal("etcd-adapter-system"))
	g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeEgress}))

	var podLabels map[string]string
	for _, o := range components(g) {
		if o.GetKind() == "Deployment" {
			podLabels, _, _ = unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		}
	}
	g.Expect(podLabels).NotTo(BeEmpty())
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Empty()).To(BeFalse(), "the policy must select the manager, not every Pod of the namespace")
	g.Expect(sel.Matches(labels.Set(podLabels))).To(BeTrue(), "the policy does not select the manager Pods (%v)", podLabels)

	type port struct {
		proto corev1.Protocol
		port  int
	}
	var allowed []port
	for _, rule := range np.Spec.Egress {
		for _, p := range rule.Ports {
			g.Expect(p.Port).NotTo(BeNil(), "a rule without a port allows every port")
			g.Expect(p.Port.Type).To(Equal(intstr.Int))
			allowed = append(allowed, port{*p.Protocol, p.Port.IntValue()})
		}
		g.Expect(rule.Ports).NotTo(BeEmpty(), "a rule without ports allows every port")
	}
	g.Expect(allowed).To(ConsistOf(port{corev1.ProtocolUDP, 53}, port{corev1.ProtocolTCP, 53},
		port{corev1.ProtocolTCP, 443}, port{corev1.ProtocolTCP, 6443}, port{corev1.ProtocolTCP, 2379}))

	s, err := env.StartAPIServer(env.APIServerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(s.Stop()).To(Succeed()) })
	ctx := context.Background()
	g.Expect(s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: np.Namespace}})).To(Succeed())
	g.Expect(s.Client.Create(ctx, objs[0], client.DryRunAll)).To(Succeed())
}
