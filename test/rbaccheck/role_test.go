package rbaccheck

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
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
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	g.Expect(yaml.Unmarshal(b, role)).To(Succeed())
	g.Expect(role.Rules).NotTo(BeEmpty())
	g.Expect(Allowed([]RuleSet{{Name: "config/rbac/role.yaml", Rules: role.Rules}}, NeverGranted)).To(BeEmpty())
	secretsGet := Request{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "c-kubeconfig"}
	_, ok := RuleSet{Rules: role.Rules}.Allows(secretsGet)
	g.Expect(ok).To(BeTrue(), "the manager reads the Secrets it needs by name")
}
