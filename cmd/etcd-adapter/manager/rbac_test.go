package manager

import (
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// asServiceAccount installs the generated manager ClusterRole (under a name of its own) and the
// leader-election Role in ns, binds them to ServiceAccount ns/manager as config/rbac does, and
// returns the management config impersonating that ServiceAccount: the manager then has exactly
// the permissions the released components give it.
func asServiceAccount(ctx context.Context, g Gomega, ns string) *rest.Config {
	const sa = "manager"
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}

	role := &rbacv1.ClusterRole{}
	readYAML(g, filepath.Join("..", "..", "..", "config", "rbac", "role.yaml"), role)
	role.ObjectMeta = metav1.ObjectMeta{Name: "etcd-adapter-manager-" + ns}
	g.Expect(mgmt.Client.Create(ctx, role)).To(Succeed())
	g.Expect(mgmt.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{subject},
	})).To(Succeed())

	le := &rbacv1.Role{}
	readYAML(g, filepath.Join("..", "..", "..", "config", "rbac", "leader_election_role.yaml"), le)
	le.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "leader-election"}
	g.Expect(mgmt.Client.Create(ctx, le)).To(Succeed())
	g.Expect(mgmt.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: le.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: le.Name},
		Subjects:   []rbacv1.Subject{subject},
	})).To(Succeed())

	cfg := rest.CopyConfig(mgmt.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return cfg
}

func readYAML(g Gomega, path string, into any) {
	b, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal(b, into)).To(Succeed())
}
