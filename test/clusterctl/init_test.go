package clusterctl

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// TestClusterctlInit installs the addon with `clusterctl init --addon etcd-adapter` (clusterctl's
// library) from a local repository the project's release code built, and checks what clusterctl
// made of the components: the CRD, the Deployment with every variable rendered (to its default:
// clusterctl.yaml sets none), both webhook configurations and the inventory entry, all labelled
// as the addon provider. The etcd-adapter manager then runs against it, and the Machine hook
// webhook clusterctl installed puts the hook on a new control-plane Machine of a managed Cluster.
func TestClusterctlInit(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r := newRepository(t, "v0.1.0")
	m := startManagement(ctx, t, r)

	r.install(ctx, t, m, "v0.1.0")

	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed())
	g.Expect(crd.Labels).To(HaveKeyWithValue(clusterv1.ProviderNameLabel, addonLabel))
	g.Expect(crd.Labels).To(HaveKey(clusterctlv1.ClusterctlLabel), "clusterctl move discovers the ControlPlaneEtcd type by this label")

	d := &appsv1.Deployment{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: deploymentName}, d)).To(Succeed())
	g.Expect(d.Labels).To(HaveKeyWithValue(clusterv1.ProviderNameLabel, addonLabel))
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image("v0.1.0")))
	rendered, err := json.Marshal(d.Spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(rendered)).NotTo(ContainSubstring("${"), "clusterctl's processor rendered every variable (to its default)")
	components, err := r.client(ctx, t).GetProviderComponents(ctx, addon, clusterctlv1.AddonProviderType, clusterctlclient.ComponentsOptions{Version: "v0.1.0"})
	g.Expect(err).NotTo(HaveOccurred())
	for _, v := range components.Variables() {
		t.Logf("components variable %s (rendered to its default)", v)
	}

	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Name: validatingName}, v)).To(Succeed())
	g.Expect(v.Labels).To(HaveKeyWithValue(clusterv1.ProviderNameLabel, addonLabel))
	g.Expect(v.Webhooks).To(ContainElement(HaveField("Name", "etcd-quorum.etcdadapter.cluster.x-k8s.io")))
	mu := &admissionregistrationv1.MutatingWebhookConfiguration{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Name: mutatingName}, mu)).To(Succeed())
	g.Expect(mu.Labels).To(HaveKeyWithValue(clusterv1.ProviderNameLabel, addonLabel))
	g.Expect(mu.Webhooks).To(ContainElement(HaveField("Name", "etcd-hook.etcdadapter.cluster.x-k8s.io")))

	g.Expect(inventory(ctx, g, m)).To(ConsistOf(SatisfyAll(
		HaveField("Namespace", addonNamespace),
		HaveField("Name", addonLabel),
		HaveField("ProviderName", addon),
		HaveField("Type", string(clusterctlv1.AddonProviderType)),
		HaveField("Version", "v0.1.0"),
	)))

	m.runManager(ctx, t, nil)
	ns := createNamespace(ctx, g, m, "init")
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "managed"},
		Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}}}
	g.Expect(m.Client.Create(ctx, c)).To(Succeed())
	g.Expect(m.Client.Create(ctx, newControlPlaneEtcd(c))).To(Succeed())
	machine, err := env.CreateControlPlaneMachine(ctx, m.Client, env.MachineInput{Cluster: c, Name: "managed-cp-0", ProviderID: "test://managed/cp-0"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(machine.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue),
		"the Machine hook webhook that clusterctl installed put the hook on at creation")
}

// inventory returns the addon's entries in clusterctl's inventory.
func inventory(ctx context.Context, g Gomega, m *management) []clusterctlv1.Provider {
	list := &clusterctlv1.ProviderList{}
	g.Expect(m.Client.List(ctx, list, client.InNamespace(addonNamespace))).To(Succeed())
	return list.Items
}

func createNamespace(ctx context.Context, g Gomega, m *management, name string) string {
	g.Expect(m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	return name
}

// newControlPlaneEtcd is a K3s ControlPlaneEtcd in Manage mode for c, owned by it (so clusterctl
// move takes it along).
func newControlPlaneEtcd(c *clusterv1.Cluster) *v1alpha1.ControlPlaneEtcd {
	return &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: c.Name, UID: c.UID,
		}}},
		Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: c.Name, Backend: v1alpha1.BackendK3s, Mode: v1alpha1.ModeManage,
			ObservationInterval: &metav1.Duration{Duration: observationInterval}},
	}
}
