package docs_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
	"github.com/etcd-adapter/etcd-adapter/test/env/docblock"
)

// managerServiceAccount is the user the manager's Pods run as.
const managerServiceAccount = "system:serviceaccount:" + managerNamespace + ":etcd-adapter-manager"

// TestSecurityNamespacedInstall runs docs/security.md's namespaced install as the page gives it,
// from the repository root, against a real kube-apiserver (RBAC on) with Cluster API's and
// cert-manager's CRDs (the components hold an Issuer and Certificates; nothing issues them here),
// and checks what the page claims of it: the manager runs with --namespace=team-a; the apiserver
// lets its ServiceAccount read Secrets, Machines and Clusters in team-a and nowhere else, and
// cluster-wide only create TokenReviews and SubjectAccessReviews and use the override verb of
// the guarded annotations (config/policy); the webhooks are called for team-a's
// Machines and not for another namespace's (no webhook server runs, so a call fails the create).
func TestSecurityNamespacedInstall(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	capiCRDs, err := capi.CoreCRDDir()
	g.Expect(err).NotTo(HaveOccurred())
	server, err := env.StartAPIServer(env.APIServerOptions{CRDDirectoryPaths: []string{capiCRDs, certManagerCRDs(g)}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(server.Stop()).To(Succeed()) })
	c := server.Client
	// team-a holds the Clusters the manager is to serve; a namespaced install does not create it.
	for _, ns := range []string{"team-a", "team-b"} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}

	root, err := filepath.Abs(filepath.Join("..", ".."))
	g.Expect(err).NotTo(HaveOccurred())
	block := docblock.ShellBlock(g, docsDir, "security.md", "config/namespaced")
	// clusterctl asks GitHub for a newer release after each command; the test runs offline.
	docblock.NewShell(t, g, server.Config).Run(g, "cd "+root+"\nexport CLUSTERCTL_DISABLE_VERSIONCHECK=true", block)

	d := &appsv1.Deployment{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: managerDeployment}, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers).NotTo(BeEmpty())
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--namespace=team-a"))

	for _, tc := range []struct {
		namespace, group, resource, verb string
		allowed                          bool
	}{
		{"team-a", "", "secrets", "get", true},
		{"team-a", "cluster.x-k8s.io", "machines", "list", true},
		{"team-a", "cluster.x-k8s.io", "machines", "patch", true},
		{"team-a", "cluster.x-k8s.io", "clusters", "list", true},
		{"team-b", "", "secrets", "get", false},
		{"team-b", "cluster.x-k8s.io", "machines", "list", false},
		{"team-b", "cluster.x-k8s.io", "clusters", "list", false},
		{"", "", "secrets", "get", false},
		{"", "cluster.x-k8s.io", "machines", "list", false},
		{"", "cluster.x-k8s.io", "clusters", "list", false},
		{"", "authentication.k8s.io", "tokenreviews", "create", true},
		{"", "authorization.k8s.io", "subjectaccessreviews", "create", true},
		{"team-b", "etcdadapter.cluster.x-k8s.io", "controlplaneetcds", "override", true},
		{"team-b", "etcdadapter.cluster.x-k8s.io", "controlplaneetcds", "get", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   managerServiceAccount,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + managerNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: tc.namespace, Group: tc.group, Resource: tc.resource, Verb: tc.verb,
			},
		}}
		g.Expect(c.Create(ctx, sar)).To(Succeed())
		g.Expect(sar.Status.Allowed).To(Equal(tc.allowed), "the manager may %s %s in namespace %q: %s",
			tc.verb, tc.resource, tc.namespace, sar.Status.Reason)
	}
	// Cluster-wide, the manager keeps the reviews and the override verb, which reads nothing.
	bindings := &rbacv1.ClusterRoleBindingList{}
	g.Expect(c.List(ctx, bindings)).To(Succeed())
	var clusterRoles []string
	for _, b := range bindings.Items {
		if slices.Contains(b.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: managerNamespace, Name: "etcd-adapter-manager"}) {
			clusterRoles = append(clusterRoles, b.RoleRef.Name)
		}
	}
	g.Expect(clusterRoles).To(ConsistOf("etcd-adapter-manager-auth-role", "etcd-adapter-override"))

	// The Machine hook webhook (failurePolicy Fail) is called for a control-plane Machine in
	// team-a, and fails there since no manager serves it; in team-b nothing is called.
	err = c.Create(ctx, machine("team-a", "cp-0", nil))
	g.Expect(err).To(MatchError(ContainSubstring(`failed calling webhook "etcd-hook.etcdadapter.cluster.x-k8s.io"`)))
	g.Expect(c.Create(ctx, machine("team-b", "cp-0", nil))).To(Succeed(), "no webhook is called for team-b's Machines")
}

// certManagerCRDs is cert-manager's own CRD manifests, as test/clusterctl installs them.
func certManagerCRDs(g Gomega) string {
	dir, err := env.CertManagerCRDDir(repoRoot)
	g.Expect(err).NotTo(HaveOccurred())
	return dir
}
