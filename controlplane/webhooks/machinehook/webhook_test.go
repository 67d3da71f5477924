package machinehook

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// TestWebhook creates Machines through the real apiserver with the generated webhook
// configuration installed, and reads the hook from the create response.
func TestWebhook(t *testing.T) {
	tests := []struct {
		name         string
		kind         string
		clusterAnnos map[string]string
		otherShard   bool
		cpeMode      v1alpha1.Mode
		controlPlane bool
		wantHook     bool
	}{
		{name: "a K3s control-plane Machine of a Cluster with no ControlPlaneEtcd yet gets the hook (K3s defaults to Manage)",
			kind: "KThreesControlPlane", controlPlane: true, wantHook: true},
		{name: "an RKE2 control-plane Machine of a Cluster with no ControlPlaneEtcd yet gets the hook",
			kind: "RKE2ControlPlane", controlPlane: true, wantHook: true},
		{name: "a KCP control-plane Machine gets nothing (KCP defaults to Observe)",
			kind: "KubeadmControlPlane", controlPlane: true},
		{name: "a K3s Machine of a Cluster that opted out gets nothing",
			kind: "KThreesControlPlane", clusterAnnos: map[string]string{v1alpha1.OptOutAnnotation: "true"}, controlPlane: true},
		{name: "a Machine of any control plane whose ControlPlaneEtcd says Manage gets the hook",
			kind: "MyControlPlane", cpeMode: v1alpha1.ModeManage, controlPlane: true, wantHook: true},
		{name: "a KCP Machine whose ControlPlaneEtcd a person set to Manage gets the hook",
			kind: "KubeadmControlPlane", cpeMode: v1alpha1.ModeManage, controlPlane: true, wantHook: true},
		{name: "a K3s Machine whose ControlPlaneEtcd says Observe gets nothing (the ControlPlaneEtcd wins over the default)",
			kind: "KThreesControlPlane", cpeMode: v1alpha1.ModeObserve, controlPlane: true},
		{name: "a control-plane Machine of a kind with no default and no ControlPlaneEtcd gets nothing",
			kind: "MyControlPlane", controlPlane: true},
		{name: "a worker Machine of a managed Cluster gets nothing",
			kind: "KThreesControlPlane"},
		{name: "a K3s Machine of another shard's Cluster whose ControlPlaneEtcd says Manage gets the hook",
			kind: "KThreesControlPlane", otherShard: true, cpeMode: v1alpha1.ModeManage, controlPlane: true, wantHook: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := createNamespace(ctx, g)
			cluster := createCluster(ctx, g, ns, tt.kind, tt.clusterAnnos, tt.otherShard)
			if tt.cpeMode != "" {
				createControlPlaneEtcd(ctx, g, cluster, tt.cpeMode)
			}
			c, warnings := warningClient(g)
			m := newMachine(ns, "m", cluster.Name, tt.controlPlane)
			g.Expect(c.Create(ctx, m)).To(Succeed())
			if tt.wantHook {
				g.Expect(m.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue))
			} else {
				g.Expect(m.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation))
			}
			g.Expect(warnings.list()).To(BeEmpty())
		})
	}
}

// TestWebhook_unknownCluster: a control-plane Machine whose Cluster does not exist (yet) is
// created without the hook and with a warning that says so (the controller adds the hook later).
func TestWebhook_unknownCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(ctx, g)
	c, warnings := warningClient(g)
	m := newMachine(ns, "m", "no-such-cluster", true)
	g.Expect(c.Create(ctx, m)).To(Succeed())
	g.Expect(m.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation))
	g.Expect(warnings.list()).To(ConsistOf(And(ContainSubstring("Cluster no-such-cluster"), ContainSubstring("does not exist (yet)"))))
}

// TestWebhook_otherShard: a K3s control-plane Machine of a Cluster outside the manager's
// --watch-filter, with no ControlPlaneEtcd, is created without the hook and with a warning: no
// manager is known to handle that Cluster, so nothing might ever release the hook.
func TestWebhook_otherShard(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(ctx, g)
	cluster := createCluster(ctx, g, ns, "KThreesControlPlane", nil, true)
	c, warnings := warningClient(g)
	m := newMachine(ns, "m", cluster.Name, true)
	g.Expect(c.Create(ctx, m)).To(Succeed())
	g.Expect(m.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation))
	g.Expect(warnings.list()).To(ConsistOf(ContainSubstring("outside this etcd-adapter manager's --watch-filter")))
}

// TestWebhook_keepsOtherAnnotations: the patch adds the hook and changes nothing else.
func TestWebhook_keepsOtherAnnotations(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(ctx, g)
	cluster := createCluster(ctx, g, ns, "KThreesControlPlane", nil, false)
	m := newMachine(ns, "m", cluster.Name, true)
	m.Annotations = map[string]string{v1alpha1.KCPHookAnnotation: "", "example.com/note": "kept"}
	g.Expect(apiServer.Client.Create(ctx, m)).To(Succeed())
	g.Expect(m.Annotations).To(Equal(map[string]string{
		v1alpha1.KCPHookAnnotation: "", "example.com/note": "kept", v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue,
	}))
}

// TestWebhook_Handle_noClusterName covers what the apiserver cannot send (Cluster API's CRD
// requires spec.clusterName): a Machine naming no Cluster is allowed, unpatched, with a warning.
func TestWebhook_Handle_noClusterName(t *testing.T) {
	g := NewWithT(t)
	w := &Webhook{Client: fake.NewClientBuilder().WithScheme(scheme()).Build(), decoder: admission.NewDecoder(scheme())}
	m := newMachine("ns", "m", "", true)
	raw, err := json.Marshal(m)
	g.Expect(err).NotTo(HaveOccurred())
	resp := w.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
	}})
	g.Expect(resp.Allowed).To(BeTrue())
	g.Expect(resp.Patches).To(BeEmpty())
	g.Expect(resp.Warnings).To(ConsistOf(ContainSubstring("names no Cluster")))
}

func createNamespace(ctx context.Context, g Gomega) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "machinehook-"}}
	g.Expect(apiServer.Client.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// createCluster creates a Cluster whose control plane is of the given kind (not installed: only
// the reference matters), in the webhook's shard or another one.
func createCluster(ctx context.Context, g Gomega, ns, kind string, annotations map[string]string, otherShard bool) *clusterv1.Cluster {
	label := shard
	if otherShard {
		label = "shard-b"
	}
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c", Annotations: annotations, Labels: map[string]string{clusterv1.WatchLabel: label}},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "controlplane.cluster.x-k8s.io", Kind: kind, Name: "c",
		}},
	}
	g.Expect(apiServer.Client.Create(ctx, c)).To(Succeed())
	return c
}

// createControlPlaneEtcd creates the Cluster's ControlPlaneEtcd under another name than the
// Cluster's (the webhook finds it by spec.clusterName).
func createControlPlaneEtcd(ctx context.Context, g Gomega, cluster *clusterv1.Cluster, mode v1alpha1.Mode) {
	cpe := &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Name + "-etcd"},
		Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: cluster.Name, Backend: v1alpha1.BackendK3s, Mode: mode},
	}
	g.Expect(apiServer.Client.Create(ctx, cpe)).To(Succeed())
}

func newMachine(ns, name, cluster string, controlPlane bool) *clusterv1.Machine {
	labels := map[string]string{}
	if cluster != "" {
		labels[clusterv1.ClusterNameLabel] = cluster
	}
	if controlPlane {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: cluster,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: new(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TestMachine", Name: name,
			},
		},
	}
}

// warnings collects the admission warnings the apiserver returns.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}

func warningClient(g Gomega) (client.Client, *warnings) {
	w := &warnings{}
	cfg := rest.CopyConfig(apiServer.Config)
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: apiServer.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	return c, w
}
