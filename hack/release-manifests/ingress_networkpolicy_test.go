package main

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestIngressNetworkPolicy checks the manager Pods' ingress NetworkPolicy as the components
// install it: it selects the manager's Pods, restricts ingress only (egress is not its
// business), admits the webhook port (the Deployment's webhook-server port, which the webhook
// Service targets) from any source and on that port only, the metrics port only from namespaces
// labelled metrics=enabled, and no other port. The policy's enforcement is the CNI's; envtest
// runs none, so this checks what the policy says.
func TestIngressNetworkPolicy(t *testing.T) {
	g := NewWithT(t)
	objs := components(g)
	var policies []*networkingv1.NetworkPolicy
	var deploy *appsv1.Deployment
	for _, o := range objs {
		switch o.GetKind() {
		case "NetworkPolicy":
			np := &networkingv1.NetworkPolicy{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, np)).To(Succeed())
			policies = append(policies, np)
		case "Deployment":
			deploy = &appsv1.Deployment{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, deploy)).To(Succeed())
		}
	}
	g.Expect(deploy).NotTo(BeNil())
	var np *networkingv1.NetworkPolicy
	for _, p := range policies {
		if p.Name == "etcd-adapter-allow-webhook-and-metrics-ingress" {
			np = p
		}
	}
	g.Expect(np).NotTo(BeNil())
	g.Expect(np.Namespace).To(Equal(deploy.Namespace))
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Matches(labels.Set(deploy.Spec.Template.Labels))).To(BeTrue(), "the policy selects the manager's Pods")
	g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))

	ports := map[string]int32{}
	for _, p := range deploy.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	webhook, metrics := intstr.FromInt32(ports["webhook-server"]), intstr.FromInt32(ports["metrics"])
	tcp := corev1.ProtocolTCP
	g.Expect(np.Spec.Ingress).To(ConsistOf(
		networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &webhook}}},
		networkingv1.NetworkPolicyIngressRule{
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &metrics}},
			From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"metrics": "enabled"}}}},
		},
	))
	g.Expect(webhook.IntVal).To(Equal(int32(9443)))
	g.Expect(metrics.IntVal).To(Equal(int32(8443)))
}
