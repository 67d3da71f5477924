package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// kubeadmControlPlaneGVK is KubeadmControlPlane v1beta2. The suite installs its CRD and runs no
// KCP controller: the objects stand for what a user applies, and etcd-adapter reads them.
var kubeadmControlPlaneGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"}

var _ = Describe("External etcd of a KubeadmControlPlane", func() {
	It("gets an external ControlPlaneEtcd in Observe that reports every member by etcd's own ID and health, and never holds a control-plane Machine deletion", func(ctx SpecContext) {
		By("a real 3-member TLS etcd outside the workload cluster, and its Secrets as Cluster API names them for external etcd")
		x := startExternalEtcd(ctx, "ext", etcdcluster.Nodes("etcd", 3))
		etcdc, wl, cluster := x.Etcd, x.APIServer, x.cluster

		By("two control-plane Machines bound to Nodes of the workload cluster; they host no etcd member")
		var machines []*clusterv1.Machine
		for _, node := range []string{"cp-0", "cp-1"} {
			Expect(wl.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})).To(Succeed())
			machines = append(machines, bindMachine(ctx, cluster, wl.Client, node))
		}

		By("a KubeadmControlPlane whose clusterConfiguration.etcd.external lists the members' client URLs, referenced by the Cluster")
		var endpoints []string
		wantIDs := map[string]string{} // member name -> ID in hex, as etcd gives it
		for _, m := range etcdc.Members() {
			endpoints = append(endpoints, m.ClientURL())
			wantIDs[m.Name()] = strconv.FormatUint(m.ID(), 16)
		}
		useKubeadmControlPlane(ctx, cluster, map[string]any{"external": map[string]any{
			"endpoints": toAny(endpoints), "caFile": "/etc/kubernetes/pki/etcd/ca.crt",
			"certFile": "/etc/kubernetes/pki/apiserver-etcd-client.crt", "keyFile": "/etc/kubernetes/pki/apiserver-etcd-client.key",
		}})

		By("etcd-adapter creates the Cluster's ControlPlaneEtcd: backend external, mode Observe")
		cpe := &v1alpha1.ControlPlaneEtcd{}
		Eventually(func() error {
			return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cpe)
		}, reconcileTimeout).Should(Succeed())
		Expect(cpe.Spec.Backend).To(Equal(v1alpha1.BackendExternal))
		Expect(cpe.Spec.Mode).To(Equal(v1alpha1.ModeObserve))
		before2 := cpe.DeepCopy()
		cpe.Spec.ObservationInterval = &metav1.Duration{Duration: observationInterval}
		Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(before2))).To(Succeed())

		By("mode Manage on a KubeadmControlPlane's external etcd is observed only: Progressing says ModeNotSupported")
		manage := cpe.DeepCopy()
		manage.Spec.Mode = v1alpha1.ModeManage
		Expect(mgmt.Client.Patch(ctx, manage, client.MergeFrom(cpe))).To(Succeed())
		Eventually(func(g Gomega) {
			got := &v1alpha1.ControlPlaneEtcd{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
			c := findCondition(got, v1alpha1.ProgressingCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ProgressingModeNotSupportedReason), c.Message)
		}, reconcileTimeout).Should(Succeed())

		By("the status lists the 3 members with etcd's own IDs, all healthy, on no Machine")
		Eventually(func(g Gomega) {
			got := &v1alpha1.ControlPlaneEtcd{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
			g.Expect(got.Status.Members).To(HaveLen(3))
			for _, m := range got.Status.Members {
				g.Expect(m.ID).To(Equal(wantIDs[m.Name]), "member %s", m.Name)
				g.Expect(m.Health).To(Equal(v1alpha1.MemberHealthy), "member %s: %s", m.Name, m.Message)
				g.Expect(m.MachineName).To(BeEmpty())
			}
			g.Expect(got.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(3)))
			g.Expect(got.Status.Leader).NotTo(BeEmpty())
			g.Expect(conditionStatus(got, v1alpha1.EtcdClusterHealthyCondition)).To(Equal(metav1.ConditionTrue), fmt.Sprint(findCondition(got, v1alpha1.EtcdClusterHealthyCondition)))
		}, reconcileTimeout).Should(Succeed())

		By("stopping one member: the status says it is unhealthy, and the others healthy")
		stopped := etcdc.Members()[2]
		Expect(etcdc.StopMember(ctx, stopped.Name())).To(Succeed())
		Eventually(func(g Gomega) {
			got := &v1alpha1.ControlPlaneEtcd{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
			g.Expect(got.Status.Members).To(HaveLen(3))
			for _, m := range got.Status.Members {
				if m.Name == stopped.Name() {
					g.Expect(m.Health).To(Equal(v1alpha1.MemberUnhealthy))
					g.Expect(m.Message).NotTo(BeEmpty())
					continue
				}
				g.Expect(m.Health).To(Equal(v1alpha1.MemberHealthy), "member %s: %s", m.Name, m.Message)
			}
			g.Expect(got.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(2)))
			g.Expect(got.Status.FaultTolerance).To(HaveValue(BeEquivalentTo(0)))
			g.Expect(conditionStatus(got, v1alpha1.EtcdClusterHealthyCondition)).To(Equal(metav1.ConditionFalse))
			g.Expect(conditionStatus(got, v1alpha1.AvailableCondition)).To(Equal(metav1.ConditionTrue))
		}, reconcileTimeout).Should(Succeed())

		By("deleting every control-plane Machine, the last one too: the quorum guard lets each through with no warning, and Cluster API deletes it")
		for _, m := range machines {
			Expect(deleteMachine(ctx, m)).To(BeEmpty(), "Machine %s", m.Name)
			Eventually(func() error {
				return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{})
			}, deletionTimeout).Should(Satisfy(apierrors.IsNotFound), "Machine %s", m.Name)
		}
		members, err := etcdc.MemberList(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(members).To(HaveLen(3), "deleting control-plane Machines removes no external member")
	}, SpecTimeout(5*time.Minute))
})

// externalEtcd is a Cluster registered with an external etcd workload cluster (a workload
// apiserver of its own and a real TLS etcd outside it), with the Secrets Cluster API names for
// external etcd (the etcd CA and the apiserver's client certificate).
type externalEtcd struct {
	*workload.External
	ns      string
	cluster *clusterv1.Cluster
}

// startExternalEtcd starts the etcd of members and a workload apiserver, and registers Cluster
// name in a new namespace; all of it is stopped when the spec ends.
func startExternalEtcd(ctx context.Context, name string, members []etcdcluster.MemberSpec) externalEtcd {
	x, err := workload.StartExternal(ctx, workload.ExternalOptions{Members: members})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(x.Close)
	ns := createNamespace(ctx)
	cluster, err := env.RegisterCluster(ctx, mgmt.Client, env.ClusterInput{Namespace: ns, Name: name, Workload: x.APIServer.Config})
	Expect(err).NotTo(HaveOccurred())
	for _, s := range x.Secrets(ns, cluster.Name) {
		Expect(mgmt.Client.Create(ctx, s)).To(Succeed())
	}
	return externalEtcd{External: x, ns: ns, cluster: cluster}
}

// useKubeadmControlPlane creates a KubeadmControlPlane named as the Cluster (see
// createKubeadmControlPlane) and makes it the Cluster's control plane.
func useKubeadmControlPlane(ctx context.Context, cluster *clusterv1.Cluster, etcdSpec map[string]any) {
	createKubeadmControlPlane(ctx, cluster.Namespace, cluster.Name, etcdSpec)
	Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
	before := cluster.DeepCopy()
	cluster.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: kubeadmControlPlaneGVK.Group, Kind: kubeadmControlPlaneGVK.Kind, Name: cluster.Name}
	Expect(mgmt.Client.Patch(ctx, cluster, client.MergeFrom(before))).To(Succeed())
}

// createKubeadmControlPlane creates a KubeadmControlPlane whose clusterConfiguration.etcd is
// etcdSpec (nil: none, stacked etcd).
func createKubeadmControlPlane(ctx context.Context, ns, name string, etcdSpec map[string]any) {
	kcp := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"version": "v1.34.0",
		"machineTemplate": map[string]any{"spec": map[string]any{"infrastructureRef": map[string]any{
			"apiGroup": infra.Group, "kind": "TestMachineTemplate", "name": name,
		}}},
	}}}
	kcp.SetGroupVersionKind(kubeadmControlPlaneGVK)
	kcp.SetNamespace(ns)
	kcp.SetName(name)
	if etcdSpec != nil {
		Expect(unstructured.SetNestedField(kcp.Object, etcdSpec, "spec", "kubeadmConfigSpec", "clusterConfiguration", "etcd")).To(Succeed())
	}
	Expect(mgmt.Client.Create(ctx, kcp)).To(Succeed())
}

// deleteMachine deletes the Machine and returns the admission warnings.
func deleteMachine(ctx context.Context, m *clusterv1.Machine) []string {
	cfg := rest.CopyConfig(mgmt.Config)
	w := &warningCollector{}
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	Expect(dyn.Resource(clusterv1.GroupVersion.WithResource("machines")).Namespace(m.Namespace).Delete(ctx, m.Name, metav1.DeleteOptions{})).To(Succeed())
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.texts)
}

func toAny(ss []string) []any {
	out := make([]any, 0, len(ss))
	for _, s := range ss {
		out = append(out, s)
	}
	return out
}
