package clusterctl

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// observationIntervalVariable finds the clusterctl variable that sets the manager's
// --observation-interval in a release's components (`${NAME:=default}` or `${NAME}`).
var observationIntervalVariable = regexp.MustCompile(`--observation-interval=\$\{([A-Za-z0-9_]+)`)

// TestClusterctlUpgrade upgrades the addon from v0.1.0 to v0.2.0 (both built by the project's
// release code; v0.2.0's metadata.yaml lists both release series) with `clusterctl upgrade
// apply`, with a managed K3s Cluster in place: its ControlPlaneEtcd (spec and status), its
// Machines' hooks and the manager's settings must come through unchanged, and the inventory say
// v0.2.0. The setting is the observation interval's clusterctl variable, set in clusterctl.yaml,
// where clusterctl reads it on every init and upgrade.
func TestClusterctlUpgrade(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r := newRepository(t, "v0.1.0", "v0.2.0")
	raw, err := os.ReadFile(filepath.Join(r.base, addonLabel, "v0.1.0", "addon-components.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	match := observationIntervalVariable.FindSubmatch(raw)
	g.Expect(match).NotTo(BeNil(), "the components must set --observation-interval through a clusterctl variable, or clusterctl upgrade loses the setting")
	r.variables[string(match[1])] = "47s"
	g.Expect(r.writeConfig("v0.1.0")).To(Succeed())
	wantArg := "--observation-interval=47s"
	// Started first, so it is stopped last: a management cluster stops before the workload
	// clusters it watches.
	k := startK3s(ctx, t)
	m := startManagement(ctx, t, r)
	r.install(ctx, t, m, "v0.1.0")
	m.runManager(ctx, t, nil)

	ns := createNamespace(ctx, g, m, "upgrade")
	c, machines := registerK3s(ctx, g, m, k, ns, "k3s")
	g.Eventually(func(g Gomega) int32 { return healthyMembers(ctx, g, m.Client, ns, c.Name) }, time.Minute).Should(BeEquivalentTo(3))
	g.Eventually(func(g Gomega) []string { return hooked(ctx, g, m.Client, ns) }, time.Minute).Should(HaveLen(len(machines)))

	// clusterctl upgrade deletes the provider's Deployment and creates the new one: the Pods of
	// the old version are gone before the new ones start.
	m.stopManager(t)
	before := &v1alpha1.ControlPlaneEtcd{}
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(c), before)).To(Succeed())
	argsBefore := managerArgs(ctx, g, m)
	g.Expect(argsBefore).To(ContainElement(wantArg), "clusterctl init rendered the setting from clusterctl.yaml")

	err = r.client(ctx, t).ApplyUpgrade(ctx, clusterctlclient.ApplyUpgradeOptions{
		Kubeconfig:     m.Kubeconfig,
		AddonProviders: []string{addonNamespace + "/" + addon + ":v0.2.0"},
	})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(inventory(ctx, g, m)).To(ConsistOf(HaveField("Version", "v0.2.0")))
	d := &appsv1.Deployment{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: deploymentName}, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image("v0.2.0")))
	g.Expect(managerArgs(ctx, g, m)).To(Equal(argsBefore), "the manager's settings came through the upgrade")
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())
	after := &v1alpha1.ControlPlaneEtcd{}
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(c), after)).To(Succeed())
	g.Expect(after.UID).To(Equal(before.UID), "the ControlPlaneEtcd was kept, not re-created")
	g.Expect(after.Spec).To(Equal(before.Spec))
	g.Expect(after.Status).To(Equal(before.Status))
	for _, machine := range machines {
		got := &clusterv1.Machine{}
		g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(machine), got)).To(Succeed())
		g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue), "Machine %s", machine.Name)
	}

	// The new version runs, serves the webhooks clusterctl re-created and observes the Cluster.
	m.runManager(ctx, t, nil)
	g.Eventually(func(g Gomega) int64 {
		cpe := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(c), cpe)).To(Succeed())
		g.Expect(cpe.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(3)))
		return cpe.Generation
	}, time.Minute).Should(Equal(before.Generation))
	g.Expect(hooked(ctx, g, m.Client, ns)).To(HaveLen(len(machines)))
}

// managerArgs returns the arguments of the etcd-adapter Deployment's manager container.
func managerArgs(ctx context.Context, g Gomega, m *management) []string {
	d := &appsv1.Deployment{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: addonNamespace, Name: deploymentName}, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
	return d.Spec.Template.Spec.Containers[0].Args
}
