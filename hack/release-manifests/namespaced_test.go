package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// clusterScopedRules are the groups of the generated role's rules a namespaced install keeps in
// a ClusterRole: TokenReviews and SubjectAccessReviews are cluster-scoped resources.
var clusterScopedRules = []string{"authentication.k8s.io", "authorization.k8s.io"}

// TestNamespacedInstall renders config/namespaced for namespace team-a and checks that the
// manager's rules are a Role and RoleBinding there (the generated rules but the cluster-scoped
// ones), that only TokenReviews and SubjectAccessReviews stay cluster-wide, that the manager runs
// with --namespace=team-a, and that every webhook is called for team-a's objects only.
func TestNamespacedInstall(t *testing.T) {
	g := NewWithT(t)
	objs := renderDir(g, "namespaced", map[string]string{"ETCD_ADAPTER_WATCH_NAMESPACE": "team-a"})

	generated := &rbacv1.ClusterRole{}
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal(b, generated)).To(Succeed())
	var namespaced, clusterWide []rbacv1.PolicyRule
	for _, r := range generated.Rules {
		if slices.Contains(clusterScopedRules, r.APIGroups[0]) {
			clusterWide = append(clusterWide, r)
		} else {
			namespaced = append(namespaced, r)
		}
	}
	g.Expect(clusterWide).To(HaveLen(2))

	sa := subjectOf(g, objs)
	var roles, clusterRoles []*rbacv1.Role
	bindings := map[string]*rbacv1.RoleBinding{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Role", "ClusterRole":
			r := &rbacv1.Role{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, r)).To(Succeed())
			if o.GetKind() == "Role" {
				roles = append(roles, r)
			} else {
				clusterRoles = append(clusterRoles, r)
			}
		case "RoleBinding", "ClusterRoleBinding":
			rb := &rbacv1.RoleBinding{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, rb)).To(Succeed())
			bindings[o.GetKind()+"/"+rb.Namespace+"/"+rb.RoleRef.Name] = rb
		}
	}

	// The manager's rules are a Role in team-a, bound to its ServiceAccount there.
	role := findRole(roles, "team-a", "etcd-adapter-manager-role")
	g.Expect(role).NotTo(BeNil(), "a Role etcd-adapter-manager-role in team-a")
	g.Expect(role.Rules).To(Equal(namespaced))
	rb := bindings["RoleBinding/team-a/etcd-adapter-manager-role"]
	g.Expect(rb).NotTo(BeNil())
	g.Expect(rb.RoleRef.Kind).To(Equal("Role"))
	g.Expect(rb.Subjects).To(Equal([]rbacv1.Subject{sa}))

	// Cluster-wide, the manager keeps only the cluster-scoped rules; the metrics reader role
	// (for scrapers, bound to nobody here) is the only other ClusterRole.
	for _, cr := range clusterRoles {
		crb := bindings["ClusterRoleBinding//"+cr.Name]
		if crb == nil || !slices.Contains(crb.Subjects, sa) {
			continue
		}
		g.Expect(cr.Name).To(Equal("etcd-adapter-manager-auth-role"), "the only ClusterRole bound to the manager")
		g.Expect(cr.Rules).To(Equal(clusterWide))
	}
	g.Expect(bindings).To(HaveKey("ClusterRoleBinding//etcd-adapter-manager-auth-role"))

	g.Expect(deployment(g, objs).Options.Namespace).To(Equal("team-a"))

	for _, o := range objs {
		if o.GetKind() != "ValidatingWebhookConfiguration" && o.GetKind() != "MutatingWebhookConfiguration" {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		g.Expect(hooks).NotTo(BeEmpty())
		for _, h := range hooks {
			sel, _, _ := unstructured.NestedStringMap(h.(map[string]any), "namespaceSelector", "matchLabels")
			g.Expect(sel).To(Equal(map[string]string{"kubernetes.io/metadata.name": "team-a"}), "%s webhook %v", o.GetKind(), h.(map[string]any)["name"])
		}
	}
}

// subjectOf is the manager's ServiceAccount among objs, as a binding's subject.
func subjectOf(g Gomega, objs []*unstructured.Unstructured) rbacv1.Subject {
	for _, o := range objs {
		if o.GetKind() == "ServiceAccount" {
			return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: o.GetName(), Namespace: o.GetNamespace()}
		}
	}
	g.Expect(false).To(BeTrue(), "no ServiceAccount")
	return rbacv1.Subject{}
}

func findRole(roles []*rbacv1.Role, ns, name string) *rbacv1.Role {
	for _, r := range roles {
		if r.Namespace == ns && r.Name == name {
			return r
		}
	}
	return nil
}
