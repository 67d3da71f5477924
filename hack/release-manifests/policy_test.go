package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
)

// TestGuardedAnnotationsPolicy installs the components' ValidatingAdmissionPolicy and its RBAC on
// a real apiserver with Cluster API's CRDs, and changes a control-plane Machine and a Cluster as
// three subjects that may all patch them: a tenant's admin is refused every annotation that
// bypasses or steers etcd-adapter and the removal of its hook, while the manager's
// ServiceAccount and a member of the break-glass group are let through. The tenant's other
// annotations pass, so the policy refuses only what it names.
func TestGuardedAnnotationsPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	crds, err := capi.CoreCRDDir()
	g.Expect(err).NotTo(HaveOccurred())
	s, err := env.StartAPIServer(env.APIServerOptions{CRDDirectoryPaths: []string{crds}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(s.Stop()).To(Succeed()) })

	var manager string
	for _, o := range components(g) {
		switch o.GetKind() {
		case "Namespace", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		case "ClusterRole", "ClusterRoleBinding":
			if o.GetName() != "etcd-adapter-override" && o.GetName() != "etcd-adapter-override-manager" && o.GetName() != "etcd-adapter-override-break-glass" {
				continue
			}
		case "ServiceAccount":
			manager = "system:serviceaccount:" + o.GetNamespace() + ":" + o.GetName()
			continue
		default:
			continue
		}
		g.Expect(s.Client.Create(ctx, o)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}
	g.Expect(manager).NotTo(BeEmpty())

	const ns = "tenant-a"
	g.Expect(s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	// Every subject below may patch Machines and Clusters: the policy, not RBAC, must refuse.
	g.Expect(s.Client.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"machines", "clusters"},
			Verbs: []string{"get", "list", "update", "patch"}}},
	})).To(Succeed())
	g.Expect(s.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-editor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "capi-editor"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant-admin"},
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "sre-on-call"},
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: manager},
		},
	})).To(Succeed())
	tenant := as(g, s, "tenant-admin")
	breakGlass := as(g, s, "sre-on-call", "etcd-adapter:break-glass")
	mgr := as(g, s, manager, "system:serviceaccounts", "system:serviceaccounts:etcd-adapter-system")

	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KThreesControlPlane", Name: "c"}}}
	g.Expect(s.Client.Create(ctx, cluster)).To(Succeed())
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cp-0",
			Labels:      map[string]string{clusterv1.MachineControlPlaneLabel: "", clusterv1.ClusterNameLabel: "c"},
			Annotations: map[string]string{v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue}},
		Spec: clusterv1.MachineSpec{ClusterName: "c",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptrTo("cp-0")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachine", Name: "cp-0"}},
	}
	g.Expect(s.Client.Create(ctx, machine)).To(Succeed())

	// annotate sets (value non-nil) or removes (nil) one annotation with a merge patch, as
	// `kubectl annotate` does.
	annotate := func(c client.Client, obj client.Object, key string, value *string) error {
		patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: nil}}}
		if value != nil {
			patch["metadata"].(map[string]any)["annotations"].(map[string]any)[key] = *value
		}
		return c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch("application/merge-patch+json", mustJSON(g, patch)))
	}
	refused := func(err error) bool { return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) }
	yes := ptrTo(v1alpha1.AnnotationTrue)

	// RBAC and a policy take effect once the apiserver's informers have them, a moment after they
	// are created (longer on a loaded machine): first the tenant may patch at all, so that a
	// refusal below is the policy's and not RBAC's, then the policy refuses.
	g.Eventually(func() error { return annotate(tenant, machine, "example.com/ready", ptrTo("yes")) }).
		WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "RBAC lets the tenant patch Machines")
	g.Eventually(func() error { return annotate(breakGlass, machine, "example.com/ready", nil) }).
		WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "RBAC lets the break-glass group patch Machines")
	// The policy refuses a change only: an attempt the apiserver let through before it had the
	// policy is undone (as break-glass), or every later attempt would set the value it already has.
	g.Eventually(func() bool {
		err := annotate(tenant, machine, v1alpha1.SkipQuorumGuardAnnotation, yes)
		if err == nil {
			g.Expect(annotate(breakGlass, machine, v1alpha1.SkipQuorumGuardAnnotation, nil)).To(Succeed())
		}
		return refused(err)
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(BeTrue(), "a tenant's admin must not skip the quorum guard")
	for _, key := range []string{v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.ReleaseHookAnnotation, v1alpha1.RetryRemovalAnnotation} {
		err := annotate(tenant, machine, key, yes)
		g.Expect(refused(err)).To(BeTrue(), "tenant setting %s: %v", key, err)
		g.Expect(err).To(MatchError(ContainSubstring(key)), "the refusal names the annotation")
	}
	g.Expect(refused(annotate(tenant, machine, v1alpha1.PreTerminateHookAnnotation, nil))).To(BeTrue(), "a tenant's admin must not take the hook off")
	g.Expect(refused(annotate(tenant, cluster, v1alpha1.OptOutAnnotation, yes))).To(BeTrue(), "a tenant's admin must not opt the Cluster out")
	g.Expect(annotate(tenant, machine, "example.com/owner", ptrTo("team-a"))).To(Succeed(), "other annotations are the tenant's")

	g.Expect(annotate(breakGlass, machine, v1alpha1.SkipQuorumGuardAnnotation, yes)).To(Succeed())
	g.Expect(annotate(breakGlass, cluster, v1alpha1.OptOutAnnotation, yes)).To(Succeed())
	g.Expect(refused(annotate(tenant, machine, v1alpha1.SkipQuorumGuardAnnotation, nil))).To(BeTrue(), "nor may a tenant remove one")
	g.Expect(annotate(mgr, machine, v1alpha1.RetryRemovalAnnotation, yes)).To(Succeed())
	g.Expect(annotate(mgr, machine, v1alpha1.RetryRemovalAnnotation, nil)).To(Succeed())
	g.Expect(annotate(mgr, machine, v1alpha1.PreTerminateHookAnnotation, nil)).To(Succeed(), "the manager takes its own hook off")

	got := &clusterv1.Machine{}
	g.Expect(s.Client.Get(ctx, client.ObjectKeyFromObject(machine), got)).To(Succeed())
	g.Expect(got.Annotations).To(And(HaveKeyWithValue(v1alpha1.SkipQuorumGuardAnnotation, "true"), HaveKeyWithValue("example.com/owner", "team-a"),
		Not(HaveKey(v1alpha1.PreTerminateHookAnnotation)), Not(HaveKey(v1alpha1.ReleaseHookAnnotation)), Not(HaveKey(v1alpha1.RetryRemovalAnnotation))))
}

// as returns a client of s that impersonates user in groups (RBAC then decides for that user).
func as(g Gomega, s *env.APIServer, user string, groups ...string) client.Client {
	cfg := rest.CopyConfig(s.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string{"system:authenticated"}, groups...)}
	c, err := client.New(cfg, client.Options{Scheme: s.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func mustJSON(g Gomega, v any) []byte {
	b, err := json.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	return b
}

func ptrTo[T any](v T) *T { return &v }
