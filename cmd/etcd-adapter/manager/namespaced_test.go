package manager

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/rbaccheck"
)

// TestRun_namespaced runs the manager with --namespace as the namespaced install
// (config/namespaced) binds it: the Role that overlay renders for the watched namespace, and
// nothing cluster-wide (its metrics endpoint is served without authentication here, so it makes
// no TokenReview). A Cluster of the namespace gets its ControlPlaneEtcd with a status; a Cluster
// of another namespace gets none; the apiserver refused no request, and every request the
// manager made was within the namespace.
func TestRun_namespaced(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, other := createNamespace(ctx, g), createNamespace(ctx, g)
	cfg := asNamespacedServiceAccount(ctx, g, ns)
	recorder := rbaccheck.NewRecorder()
	recorder.Wrap(cfg)

	o, health, _ := testOptions(g)
	o.Namespace, o.Webhooks = ns, false
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, cfg, o) }()
	g.Eventually(func() (int, error) { return statusOf("http://" + health + "/readyz") }).WithTimeout(time.Minute).Should(Equal(http.StatusOK))

	outside := createCluster(ctx, g, other, "k3s-outside", nil)
	cluster := createCluster(ctx, g, ns, "k3s-inside", nil)
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(mgmt.Client.Status().Update(ctx, cluster)).To(Succeed())
	cpe := waitForStatus(ctx, g, ns, cluster.Name)
	g.Expect(cpe.Spec.Backend).To(Equal(v1alpha1.BackendK3s))
	stop()
	g.Expect(<-done).To(Succeed())

	err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(outside), &v1alpha1.ControlPlaneEtcd{})
	g.Expect(err).To(HaveOccurred(), "a Cluster outside --namespace got a ControlPlaneEtcd")
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	for _, r := range recorder.Requests() {
		g.Expect(r.Code).NotTo(BeElementOf(http.StatusUnauthorized, http.StatusForbidden), "the apiserver refused %s", r)
		if r.IsResource() {
			g.Expect(r.Namespace).To(Equal(ns), "a request outside the watched namespace: %s", r)
		}
	}
}

// asNamespacedServiceAccount renders config/namespaced for ns, installs its manager Role in ns,
// binds it to ServiceAccount ns/manager, and returns the management config impersonating it.
func asNamespacedServiceAccount(ctx context.Context, g Gomega, ns string) *rest.Config {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join("..", "..", "..", "config", "namespaced"))
	g.Expect(err).NotTo(HaveOccurred())
	var role *rbacv1.Role
	for _, res := range m.Resources() {
		if res.GetKind() != "Role" || res.GetName() != "etcd-adapter-manager-role" {
			continue
		}
		b, err := res.AsYAML()
		g.Expect(err).NotTo(HaveOccurred())
		role = &rbacv1.Role{}
		g.Expect(yaml.Unmarshal([]byte(strings.ReplaceAll(string(b), "${ETCD_ADAPTER_WATCH_NAMESPACE}", ns)), role)).To(Succeed())
	}
	g.Expect(role).NotTo(BeNil(), "config/namespaced has the manager's Role")
	g.Expect(role.Namespace).To(Equal(ns))
	role.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "etcd-adapter-manager"}
	g.Expect(mgmt.Client.Create(ctx, role)).To(Succeed())
	const sa = "manager"
	g.Expect(mgmt.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	})).To(Succeed())
	cfg := rest.CopyConfig(mgmt.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return cfg
}
