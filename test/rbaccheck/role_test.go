package rbaccheck

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
)

func TestAllowed(t *testing.T) {
	tests := []struct {
		name  string
		rules []rbacv1.PolicyRule
		want  int
	}{
		{"get on secrets allows no forbidden request",
			[]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}, 0},
		{"list and watch on secrets allow all of them",
			[]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}}, len(NeverGranted)},
		{"a wildcard verb allows all of them",
			[]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"*"}, Verbs: []string{"*"}}}, len(NeverGranted)},
		{"list on secrets by name is not a list of every Secret",
			[]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}, ResourceNames: []string{"c-kubeconfig"}}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Allowed([]RuleSet{{Name: "r", Rules: tt.rules}}, NeverGranted)).To(HaveLen(tt.want))
		})
	}
}

// TestManagerRole_neverGrants checks the generated role (config/rbac/role.yaml, from the
// +kubebuilder:rbac markers) against NeverGranted: a marker that brings back list or watch on
// secrets fails here.
func TestManagerRole_neverGrants(t *testing.T) {
	g := NewWithT(t)
	role := readManagerRole(g)
	g.Expect(Allowed([]RuleSet{{Name: "config/rbac/role.yaml", Rules: role.Rules}}, NeverGranted)).To(BeEmpty())
	secretsGet := Request{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "c-kubeconfig"}
	_, ok := RuleSet{Rules: role.Rules}.Allows(secretsGet)
	g.Expect(ok).To(BeTrue(), "the manager reads the Secrets it needs by name")
}

// TestManagerRole_namesEveryResource checks that the generated role grants no wildcard (every
// resource, verb or group) and that it lets the manager list and watch the control-plane kinds
// it reads (backends.ControlPlaneResources) and no other resource of their group.
func TestManagerRole_namesEveryResource(t *testing.T) {
	g := NewWithT(t)
	role := readManagerRole(g)
	for _, rule := range role.Rules {
		g.Expect(rule.Resources).NotTo(ContainElement(ContainSubstring("*")), "rule %v", rule)
		g.Expect(rule.Verbs).NotTo(ContainElement("*"), "rule %v", rule)
		g.Expect(rule.APIGroups).NotTo(ContainElement("*"), "rule %v", rule)
	}
	set := RuleSet{Name: "config/rbac/role.yaml", Rules: role.Rules}
	for _, gr := range backends.ControlPlaneResources {
		for _, verb := range []string{"list", "watch"} {
			_, ok := set.Allows(Request{Verb: verb, Group: gr.Group, Resource: gr.Resource})
			g.Expect(ok).To(BeTrue(), "%s %s", verb, gr)
		}
	}
	_, ok := set.Allows(Request{Verb: "list", Group: "controlplane.cluster.x-k8s.io", Resource: "taloscontrolplanes"})
	g.Expect(ok).To(BeFalse(), "a control-plane kind the manager does not read")
}

func readManagerRole(g Gomega) *rbacv1.ClusterRole {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	g.Expect(yaml.Unmarshal(b, role)).To(Succeed())
	g.Expect(role.Rules).NotTo(BeEmpty())
	return role
}
