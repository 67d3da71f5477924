package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/etcd-adapter/etcd-adapter/test/rbaccheck"
)

// The etcd-adapter manager of this suite runs as the ServiceAccount the released components
// bind to the generated ClusterRole (config/rbac/role.yaml), and every request it sends to the
// management apiserver is recorded. Cluster API's own controllers run on the admin config and
// are not recorded. At the end of the suite the recorded requests are checked against the role
// both ways: each is allowed by it (the apiserver enforces that already; the check names a
// request that was refused), and each grant of the role was used.
var (
	// adapterConfig is the management config of every etcd-adapter manager the suite starts.
	adapterConfig *rest.Config
	// rbacRecorder records the requests sent through adapterConfig.
	rbacRecorder *rbaccheck.Recorder
	// managerRole is config/rbac/role.yaml as installed.
	managerRole rbaccheck.RuleSet
)

const (
	// adapterNamespace and adapterServiceAccount are the manager's identity, as config/default
	// installs it (namespace etcd-adapter-system, ServiceAccount etcd-adapter-controller-manager).
	adapterNamespace      = "etcd-adapter-system"
	adapterServiceAccount = "etcd-adapter-controller-manager"
)

// unusedAllowed are grants of the role the suite does not exercise, each with the reason. Keep it
// short: a grant that is here only because nothing uses it must go from the markers instead.
var unusedAllowed = []rbaccheck.UnusedAllowance{
	{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create",
		Why: "the diagnostics endpoint (--diagnostics-address) authenticates scrapers; the suite's managers serve no metrics; TestRun in cmd/etcd-adapter/manager scrapes it"},
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verb: "create",
		Why: "the diagnostics endpoint (--diagnostics-address) authorizes scrapers; the suite's managers serve no metrics; TestRun in cmd/etcd-adapter/manager scrapes it"},
	{Group: "controlplane.cluster.x-k8s.io", Resource: "rke2controlplanes", Verb: "list",
		Why: "the suite installs no RKE2ControlPlane CRD (test/env/rke2cp stands in for the provider's hook only), so the kind is never read"},
	{Group: "controlplane.cluster.x-k8s.io", Resource: "rke2controlplanes", Verb: "watch",
		Why: "as list: no RKE2ControlPlane CRD in the suite"},
	{Group: "etcdadapter.cluster.x-k8s.io", Resource: "controlplaneetcds", Verb: "patch",
		Why: "the creation controller patches a ControlPlaneEtcd's cluster.x-k8s.io/watch-filter label when its Cluster is relabelled; the suite runs no --watch-filter and relabels no Cluster; the creation controller's unit tests cover it"},
}

// setUpAdapterIdentity installs the generated ClusterRole, binds it to the manager's
// ServiceAccount, and builds adapterConfig: the admin config impersonating that ServiceAccount,
// recording every request. Leader election is off in this suite, so its Role is not installed.
func setUpAdapterIdentity(ctx context.Context) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	Expect(yaml.Unmarshal(b, role)).To(Succeed())
	role.ObjectMeta = metav1.ObjectMeta{Name: "etcd-adapter-e2e-manager"}
	Expect(mgmt.Client.Create(ctx, role)).To(Succeed())
	Expect(mgmt.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: adapterServiceAccount, Namespace: adapterNamespace}},
	})).To(Succeed())
	managerRole = rbaccheck.RuleSet{Name: "config/rbac/role.yaml", Rules: role.Rules}

	adapterConfig = rest.CopyConfig(mgmt.Config)
	adapterConfig.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + adapterNamespace + ":" + adapterServiceAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + adapterNamespace, "system:authenticated"},
	}
	rbacRecorder = rbaccheck.NewRecorder()
	rbacRecorder.Wrap(adapterConfig)
}

// checkAdapterRBAC checks the recorded requests against the role. Every request must be allowed
// in any run; that every grant was used is checked only when the whole suite ran (a focused run
// exercises a part of the manager).
func checkAdapterRBAC() {
	if rbacRecorder == nil {
		return
	}
	var refused []string
	for _, r := range rbacRecorder.Requests() {
		GinkgoWriter.Printf("  %d %s\n", r.Code, r)
		if r.Code == 401 || r.Code == 403 {
			refused = append(refused, r.String())
		}
	}
	requests := rbacRecorder.ResourceRequests()
	res := rbaccheck.Check(requests, []rbaccheck.RuleSet{managerRole}, append(unusedAllowed, rbaccheck.WatchListFallbacks(requests)...))
	GinkgoWriter.Printf("RBAC of the etcd-adapter manager: %d distinct requests recorded\n%s", len(rbacRecorder.Requests()), res)
	Expect(refused).To(BeEmpty(), "the management apiserver refused requests of the etcd-adapter manager")
	Expect(res.Denied).To(BeEmpty(), "requests of the etcd-adapter manager that config/rbac/role.yaml does not allow:\n%s", res)
	Expect(rbaccheck.Allowed([]rbaccheck.RuleSet{managerRole}, rbaccheck.NeverGranted)).To(BeEmpty(), "config/rbac/role.yaml grants what the manager must never have")
	if wholeSuite() {
		Expect(res.Unused).To(BeEmpty(), "config/rbac/role.yaml is wider than what the etcd-adapter manager used in the end-to-end suite:\n%s", res)
	} else if len(res.Unused) > 0 {
		GinkgoWriter.Printf("Not checking unused grants: only part of the suite ran\n")
	}
}

// wholeSuite reports whether every spec of the suite was selected to run.
func wholeSuite() bool {
	sc, _ := GinkgoConfiguration()
	return len(sc.FocusStrings) == 0 && len(sc.SkipStrings) == 0 && len(sc.FocusFiles) == 0 &&
		len(sc.SkipFiles) == 0 && strings.TrimSpace(sc.LabelFilter) == "" && !sc.DryRun
}
