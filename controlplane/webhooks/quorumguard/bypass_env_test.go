package quorumguard

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	etcdfake "github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
)

// TestGuard_bypassEventsOnTheAPIServer: every way past the guard that a person can take is
// recorded, by the manager's recorder on the real apiserver, as a Warning Event on the Machine and
// on the ControlPlaneEtcd that names the bypass and the user the apiserver authenticated for the
// deletion: skip-quorum-guard=true, a paused Cluster, and delete-for-move on a paused Cluster
// (which anyone who may annotate a Machine can set, not only clusterctl move). Next to a broken
// member, so that the guard would refuse each deletion it checked.
func TestGuard_bypassEventsOnTheAPIServer(t *testing.T) {
	tests := []struct {
		name        string
		paused      bool
		annotations map[string]string
		wantReason  string
	}{
		{name: "skip-quorum-guard=true", annotations: map[string]string{v1alpha1.SkipQuorumGuardAnnotation: v1alpha1.AnnotationTrue},
			wantReason: v1alpha1.EventQuorumGuardSkipped},
		{name: "a paused Cluster", paused: true, wantReason: v1alpha1.EventDeletionAllowedClusterPaused},
		{name: "delete-for-move on a paused Cluster", paused: true, annotations: map[string]string{v1alpha1.DeleteForMoveAnnotation: ""},
			wantReason: v1alpha1.EventDeletionAllowedForMove},
	}
	mc := managementCluster(t, staticBackend{&etcdfake.Cluster{ObserveResponse: broken(healthy(3), 1)}})
	s := mc.apiServer
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "guard-"}}
			g.Expect(s.Client.Create(ctx, ns)).To(Succeed())
			c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "c"},
				Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}}}
			if tt.paused {
				c.Spec.Paused = ptr.To(true)
			}
			cpe := &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "c"},
				Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c", Backend: v1alpha1.BackendKubeadm, Mode: v1alpha1.ModeManage}}
			g.Expect(s.Client.Create(ctx, c)).To(Succeed())
			g.Expect(s.Client.Create(ctx, cpe)).To(Succeed())
			var doomed *clusterv1.Machine
			for n := range 3 {
				m := machine(fmt.Sprintf("m-cp-%d", n), fmt.Sprintf("cp-%d", n), false)
				m.Namespace = ns.Name
				m.Spec.Bootstrap = clusterv1.Bootstrap{DataSecretName: ptr.To(m.Name)}
				m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TestMachine", Name: m.Name}
				if n == 0 {
					maps.Copy(m.Annotations, tt.annotations)
					doomed = m
				}
				status := m.Status
				g.Expect(s.Client.Create(ctx, m)).To(Succeed())
				m.Status = status
				g.Expect(s.Client.Status().Update(ctx, m)).To(Succeed())
			}
			tenant := impersonating(g, s.Config, "tenant-alice")

			// Note: the guard reads the Cluster and its ControlPlaneEtcd from the manager's cache,
			// which sees them a moment after they were created; until then it lets the deletion
			// through silently (no ControlPlaneEtcd), so the deletion is made once, below.
			g.Eventually(func() error {
				if err := mc.cached.Get(ctx, client.ObjectKeyFromObject(c), &clusterv1.Cluster{}); err != nil {
					return err
				}
				return mc.cached.Get(ctx, client.ObjectKeyFromObject(cpe), &v1alpha1.ControlPlaneEtcd{})
			}, time.Minute, 100*time.Millisecond).Should(Succeed())
			g.Expect(tenant.Delete(ctx, doomed)).To(Succeed())

			warning := func(kind, name string) OmegaMatcher {
				return And(HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", tt.wantReason),
					HaveField("InvolvedObject.Kind", kind), HaveField("InvolvedObject.Name", name),
					HaveField("Message", ContainSubstring(`deletion requested by user "tenant-alice"`)))
			}
			g.Eventually(func() []corev1.Event {
				events := &corev1.EventList{}
				g.Expect(s.Client.List(ctx, events, client.InNamespace(ns.Name))).To(Succeed())
				return events.Items
			}, time.Minute, 100*time.Millisecond).Should(And(ContainElement(warning("Machine", doomed.Name)),
				ContainElement(warning(v1alpha1.ControlPlaneEtcdKind, cpe.Name))), "case %d", i)
		})
	}
}

// impersonating returns a client that deletes as user, with every right (system:masters): the
// guard, not RBAC, is what the test is about.
func impersonating(g Gomega, cfg *rest.Config, user string) client.Client {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated", "system:masters"}}
	c, err := client.New(cfg, client.Options{Scheme: mgmt.apiServer.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}
