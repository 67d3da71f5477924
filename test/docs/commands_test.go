// Package docs_test runs the shell blocks of README.md and docs/*.md as the pages give them:
// extracted with docblock.ShellBlock, run with bash and kubectl v1.36.3 against a real
// kube-apiserver with Cluster API's and etcd-adapter's CRDs, and judged by what they did to the
// objects or what they printed: upgrading and uninstalling, letting Prometheus scrape the
// manager, taking a hook off, releasing a stuck hook, retrying a removal, skipping the quorum
// guard, reading the status, diagnosing a stuck removal, a stopped removal and a manager that is
// down; the make blocks run with make -n (makeblocks_test.go). What etcd-adapter's manager then
// does with an annotation is tested where the manager runs (test/e2e); here no manager runs, so
// each step's own effect is what is checked, and the status a block reads is written by the
// test. TestEveryShellBlockIsRun checks that every command block of the pages is run by a test
// of the repository.
package docs_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
	"github.com/etcd-adapter/etcd-adapter/test/env/docblock"
)

const (
	// hook is etcd-adapter's pre-terminate hook annotation on a Machine.
	hook = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/etcd-adapter"
	// optOut is the Cluster annotation that hands a Cluster back.
	optOut = "etcd-adapter.cluster.x-k8s.io/opt-out"
	// memberHealthy is etcd-adapter's etcd member condition on a Machine.
	memberHealthy = "EtcdAdapterMemberHealthy"
	// legacyHook is cluster-api-k3s's bare pre-terminate hook annotation.
	legacyHook = "pre-terminate.delete.hook.machine.cluster.x-k8s.io"
	// managerNamespace and managerDeployment are the clusterctl components' names.
	managerNamespace  = "etcd-adapter-system"
	managerDeployment = "etcd-adapter-controller-manager"
)

var cpeGVK = schema.GroupVersionKind{Group: "etcdadapter.cluster.x-k8s.io", Version: "v1alpha1", Kind: "ControlPlaneEtcd"}

// TestDocCommands starts one apiserver and runs each page's blocks against objects of their own.
func TestDocCommands(t *testing.T) {
	g := NewWithT(t)
	capiCRDs, err := capi.CoreCRDDir()
	g.Expect(err).NotTo(HaveOccurred())
	server, err := env.StartAPIServer(env.APIServerOptions{
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases"), capiCRDs},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(server.Stop()).To(Succeed()) })
	sh := docblock.NewShell(t, g, server.Config)

	t.Run("uninstall", func(t *testing.T) { testUninstall(t, server.Client, sh) })
	t.Run("annotations", func(t *testing.T) { testAnnotations(t, server.Client, sh) })
	t.Run("upgrade", func(t *testing.T) { testUpgrade(t, sh) })
	t.Run("metrics reader", func(t *testing.T) { testMetricsReader(t, server.Client, sh) })
	t.Run("diagnose", func(t *testing.T) { testDiagnose(t, server.Config, sh) })
	t.Run("manager down", func(t *testing.T) { testManagerDown(t, server.Config, server.Client, sh) })
}

// testUpgrade runs docs/operations.md's upgrade block with a stand-in for clusterctl that records
// its arguments: it must pass the quick start's --config, which holds the settings of `init`.
// test/clusterctl's TestDocsInstallUpgradeUninstall runs the block with the real clusterctl
// binary on an install of the quick start's.
func testUpgrade(t *testing.T, sh *docblock.Shell) {
	g := NewWithT(t)
	repo := t.TempDir()
	block := shellBlock(g, "operations.md", "clusterctl upgrade apply")
	g.Expect(clusterctlArgs(g, sh, repo, block)).To(HaveExactElements(
		"upgrade", "apply", "--config", filepath.Join(repo, "clusterctl.yaml"),
		"--addon", MatchRegexp(`^etcd-adapter-system/etcd-adapter:v\d+\.\d+\.\d+$`)))
}

// testMetricsReader runs docs/operations.md's block that lets a Prometheus scrape the manager,
// with its placeholders filled in: the ServiceAccount gets the metrics reader ClusterRole.
func testMetricsReader(t *testing.T, c client.Client, sh *docblock.Shell) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	block := shellBlock(g, "operations.md", "create clusterrolebinding")
	sh.Run(g, "", fill(block, map[string]string{
		"<prometheus-namespace>": "monitoring", "<prometheus-serviceaccount>": "prometheus",
	}))
	binding := &rbacv1.ClusterRoleBinding{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "etcd-adapter-metrics-reader"}, binding)).To(Succeed())
	g.Expect(binding.RoleRef.Kind).To(Equal("ClusterRole"))
	g.Expect(binding.RoleRef.Name).To(Equal("etcd-adapter-metrics-reader"))
	g.Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Namespace: "monitoring", Name: "prometheus"}))
}

// testUninstall runs docs/operations.md's uninstall block step by step. The ControlPlaneEtcds are
// in two namespaces, neither the kubeconfig's, so a step that loses the namespace fails. No
// manager runs: the test takes the hooks and the EtcdAdapterMemberHealthy conditions off in its
// place (test/clusterctl's TestDocsInstallUpgradeUninstall runs the block with the manager).
func testUninstall(t *testing.T, c client.Client, sh *docblock.Shell) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	block := shellBlock(g, "operations.md", "clusterctl delete")
	step := steps(g, block)
	g.Expect(step).To(HaveLen(6), "the uninstall block has steps 1 to 6:\n%s", block)

	for _, ns := range []string{"team-a", "team-b", managerNamespace} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	for _, cpe := range []struct{ ns, name, mode string }{
		{"team-a", "alpha", "Manage"}, {"team-b", "beta", "Manage"}, {"team-b", "gamma", "Observe"},
	} {
		g.Expect(c.Create(ctx, controlPlaneEtcd(cpe.ns, cpe.name, cpe.mode))).To(Succeed())
	}
	// Each ControlPlaneEtcd's Cluster (gamma says "false", which step 1 must overwrite), and
	// delta, which has none and is left alone.
	for _, key := range []client.ObjectKey{{Namespace: "team-a", Name: "alpha"}, {Namespace: "team-b", Name: "beta"},
		{Namespace: "team-b", Name: "gamma"}, {Namespace: "team-b", Name: "delta"}} {
		cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KThreesControlPlane", Name: key.Name,
			}}}
		if key.Name == "gamma" {
			cluster.Annotations = map[string]string{optOut: "false"}
		}
		g.Expect(c.Create(ctx, cluster)).To(Succeed())
	}
	hooked := []client.ObjectKey{{Namespace: "team-a", Name: "alpha-cp-0"}, {Namespace: "team-b", Name: "beta-cp-0"}}
	for _, key := range hooked {
		g.Expect(c.Create(ctx, machine(key.Namespace, key.Name, map[string]string{hook: ""}))).To(Succeed())
	}
	g.Expect(c.Create(ctx, machine("team-b", "beta-cp-1", nil))).To(Succeed())
	// alpha-cp-0 and beta-cp-1 carry the condition; beta-cp-0 only a condition of someone else's.
	conditioned := []client.ObjectKey{{Namespace: "team-a", Name: "alpha-cp-0"}, {Namespace: "team-b", Name: "beta-cp-1"}}
	for key, cond := range map[client.ObjectKey]string{conditioned[0]: memberHealthy, conditioned[1]: memberHealthy, hooked[1]: "example.com/OtherWriter"} {
		m := &clusterv1.Machine{}
		g.Expect(c.Get(ctx, key, m)).To(Succeed())
		m.Status.Conditions = []metav1.Condition{{Type: cond, Status: metav1.ConditionUnknown, Reason: "Test", LastTransitionTime: metav1.Now()}}
		g.Expect(c.Status().Update(ctx, m)).To(Succeed())
	}
	g.Expect(c.Create(ctx, deployment())).To(Succeed())

	sh.Run(g, "", step["1"])
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(cpeGVK)
	g.Expect(c.List(ctx, list)).To(Succeed())
	g.Expect(list.Items).To(HaveLen(3))
	for _, cpe := range list.Items {
		mode, _, _ := unstructured.NestedString(cpe.Object, "spec", "mode")
		g.Expect(mode).To(Equal("Observe"), "step 1 put %s/%s in Observe", cpe.GetNamespace(), cpe.GetName())
		cluster := &clusterv1.Cluster{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: cpe.GetNamespace(), Name: cpe.GetName()}, cluster)).To(Succeed())
		g.Expect(cluster.Annotations).To(HaveKeyWithValue(optOut, "true"), "step 1 opted Cluster %s out", cluster.Name)
	}
	delta := &clusterv1.Cluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "delta"}, delta)).To(Succeed())
	g.Expect(delta.Annotations).NotTo(HaveKey(optOut), "step 1 opts out only the Clusters of the ControlPlaneEtcds")

	// Step 2 lists the Machines that still carry the hook; the manager takes the hooks off in
	// Observe, which this test does in its place, and then step 2 prints nothing.
	g.Expect(strings.Fields(sh.Run(g, "", step["2"]))).To(ConsistOf("team-a/alpha-cp-0", "team-b/beta-cp-0"))
	for _, key := range hooked {
		m := &clusterv1.Machine{}
		g.Expect(c.Get(ctx, key, m)).To(Succeed())
		delete(m.Annotations, hook)
		g.Expect(c.Update(ctx, m)).To(Succeed())
	}
	g.Expect(sh.Run(g, "", step["2"])).To(BeEmpty(), "step 2 prints nothing once no Machine carries the hook")

	sh.Run(g, "", step["3"])
	g.Expect(c.List(ctx, list)).To(Succeed())
	g.Expect(list.Items).To(BeEmpty(), "step 3 deletes every ControlPlaneEtcd")

	// Step 4 lists the Machines that still carry EtcdAdapterMemberHealthy; the manager takes it
	// off once no ControlPlaneEtcd is in charge, which this test does in its place.
	g.Expect(strings.Fields(sh.Run(g, "", step["4"]))).To(ConsistOf("team-a/alpha-cp-0", "team-b/beta-cp-1"))
	for _, key := range conditioned {
		m := &clusterv1.Machine{}
		g.Expect(c.Get(ctx, key, m)).To(Succeed())
		m.Status.Conditions = nil
		g.Expect(c.Status().Update(ctx, m)).To(Succeed())
	}
	g.Expect(sh.Run(g, "", step["4"])).To(BeEmpty(), "step 4 prints nothing once no Machine carries the condition")

	sh.Run(g, "", step["5"])
	d := &appsv1.Deployment{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: managerDeployment}, d)).To(Succeed())
	g.Expect(*d.Spec.Replicas).To(BeZero(), "step 5 stops the manager")

	// Step 6 is clusterctl's: a stand-in records its arguments, since the real clusterctl delete
	// finds the addon in its inventory with or without --config (test/clusterctl's
	// TestDocsInstallUpgradeUninstall runs the whole block with the real binary and the manager
	// running). $REPO is the quick start's.
	repo := t.TempDir()
	g.Expect(clusterctlArgs(g, sh, repo, step["6"])).To(HaveExactElements(
		"delete", "--config", filepath.Join(repo, "clusterctl.yaml"), "--addon", "etcd-adapter", "--include-crd"),
		"step 6 passes the quick start's --config")
}

// testAnnotations runs each block that annotates one Machine, with the page's <ns> and <machine>
// filled in, and checks the Machine's annotations after it.
func testAnnotations(t *testing.T, c client.Client, sh *docblock.Shell) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "team-c"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

	for _, tc := range []struct {
		name, page, contains, machine string
		before                        map[string]string
		after                         map[string]string
	}{{
		name: "release the hook (runbooks)", page: "runbooks.md", contains: "release-hook=true", machine: "released",
		before: map[string]string{hook: ""},
		after:  map[string]string{hook: "", "etcd-adapter.cluster.x-k8s.io/release-hook": "true"},
	}, {
		name: "retry the removal (runbooks)", page: "runbooks.md", contains: "retry-removal=true", machine: "retried",
		before: map[string]string{hook: ""},
		after:  map[string]string{hook: "", "etcd-adapter.cluster.x-k8s.io/retry-removal": "true"},
	}, {
		name: "skip the quorum guard (operations)", page: "operations.md", contains: "skip-quorum-guard=true", machine: "unguarded",
		before: map[string]string{hook: ""},
		after:  map[string]string{hook: "", "etcd-adapter.cluster.x-k8s.io/skip-quorum-guard": "true"},
	}, {
		name: "take the hook off after uninstalling (operations)", page: "operations.md", contains: hook + "-", machine: "unhooked",
		before: map[string]string{hook: "", "other": "kept"},
		after:  map[string]string{"other": "kept"},
	}, {
		name: "take cluster-api-k3s's legacy hook off (upgrade guide)", page: "upgrade-from-cluster-api-k3s.md", contains: legacyHook + "-", machine: "legacy",
		before: map[string]string{legacyHook: "k3s", hook: ""},
		after:  map[string]string{hook: ""},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(c.Create(ctx, machine(ns, tc.machine, tc.before))).To(Succeed())

			block := shellBlock(g, tc.page, tc.contains)
			sh.Run(g, "", fill(block, map[string]string{"<ns>": ns, "<machine>": tc.machine}))

			m := &clusterv1.Machine{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.machine}, m)).To(Succeed())
			g.Expect(m.Annotations).To(Equal(tc.after))
		})
	}
}

// clusterctlArgs runs script with $REPO (the quick start's release directory) set to repo and a
// stand-in for clusterctl that records its arguments, and returns them.
func clusterctlArgs(g Gomega, sh *docblock.Shell, repo, script string) []string {
	args := filepath.Join(repo, "clusterctl-args")
	sh.Run(g, "REPO="+repo+"\nclusterctl() { printf '%s\\n' \"$@\" > "+args+"; }", script)
	recorded, err := os.ReadFile(args)
	g.Expect(err).NotTo(HaveOccurred(), "the block runs clusterctl")
	return strings.Fields(string(recorded))
}

func controlPlaneEtcd(ns, name, mode string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"clusterName": name, "backend": "kubeadm", "mode": mode},
	}}
	u.SetGroupVersionKind(cpeGVK)
	return u
}

// machine is a control-plane Machine with the given annotations; no controller runs, so only
// the fields the CRD requires are set.
func machine(ns, name string, annotations map[string]string) *clusterv1.Machine {
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, Annotations: annotations,
			Labels: map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.MachineControlPlaneLabel: ""},
		},
		Spec: clusterv1.MachineSpec{
			ClusterName: "c",
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: new(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TestMachine", Name: name,
			},
		},
	}
}

// deployment stands in for the manager's Deployment: step 3 scales it.
func deployment() *appsv1.Deployment {
	labels := map[string]string{"control-plane": managerDeployment}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: managerDeployment},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "registry.example.com/etcd-adapter:v0.1.0"}}},
			},
		},
	}
}
