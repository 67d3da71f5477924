package creation

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

func TestReconciler_Reconcile(t *testing.T) {
	tests := []struct {
		name        string
		kind        string
		labels      map[string]string
		annotations map[string]string
		existing    *v1alpha1.ControlPlaneEtcd
		kcp         *unstructured.Unstructured
		etcdadm     *unstructured.Unstructured
		wantNone    bool
		wantBackend v1alpha1.Backend
		wantMode    v1alpha1.Mode
		wantLabels  map[string]string
	}{
		{name: "a K3s Cluster gets a k3s ControlPlaneEtcd in Manage", kind: "KThreesControlPlane",
			wantBackend: v1alpha1.BackendK3s, wantMode: v1alpha1.ModeManage, wantLabels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		{name: "a KCP Cluster with stacked etcd gets a kubeadm ControlPlaneEtcd in Observe", kind: "KubeadmControlPlane", kcp: kcp(nil),
			wantBackend: v1alpha1.BackendKubeadm, wantMode: v1alpha1.ModeObserve, wantLabels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		{name: "a KCP Cluster with external etcd gets an external ControlPlaneEtcd in Observe", kind: "KubeadmControlPlane",
			kcp:         kcp(map[string]any{"external": map[string]any{"endpoints": []any{"https://etcd-0:2379"}}}),
			wantBackend: v1alpha1.BackendExternal, wantMode: v1alpha1.ModeObserve, wantLabels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		{name: "a KCP Cluster whose external etcd lists no endpoints still gets an external ControlPlaneEtcd, whose status says why it cannot observe", kind: "KubeadmControlPlane",
			kcp:         kcp(map[string]any{"external": map[string]any{"caFile": "/etc/kubernetes/pki/etcd/ca.crt"}}),
			wantBackend: v1alpha1.BackendExternal, wantMode: v1alpha1.ModeObserve, wantLabels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		{name: "a KCP Cluster whose KubeadmControlPlane does not exist yet gets none until its etcd is known", kind: "KubeadmControlPlane", wantNone: true},
		{name: "a KCP Cluster that owns an EtcdadmCluster gets an external ControlPlaneEtcd in Observe, whatever its KubeadmControlPlane says", kind: "KubeadmControlPlane",
			kcp: kcp(nil), etcdadm: etcdadmCluster("c-etcd", "c", "uid-c"),
			wantBackend: v1alpha1.BackendExternal, wantMode: v1alpha1.ModeObserve, wantLabels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		{name: "a KCP Cluster that owns an EtcdadmCluster needs no KubeadmControlPlane read", kind: "KubeadmControlPlane", etcdadm: etcdadmCluster("c-etcd", "c", "uid-c"),
			wantBackend: v1alpha1.BackendExternal, wantMode: v1alpha1.ModeObserve, wantLabels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		{name: "an EtcdadmCluster owned by another Cluster changes nothing", kind: "KubeadmControlPlane", kcp: kcp(nil), etcdadm: etcdadmCluster("d-etcd", "d", "uid-d"),
			wantBackend: v1alpha1.BackendKubeadm, wantMode: v1alpha1.ModeObserve, wantLabels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		{name: "the Cluster's watch-filter label is copied, so a sharded manager sees the ControlPlaneEtcd", kind: "KThreesControlPlane",
			labels:      map[string]string{clusterv1.WatchLabel: "shard-a", "other": "not copied"},
			wantBackend: v1alpha1.BackendK3s, wantMode: v1alpha1.ModeManage,
			wantLabels: map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.WatchLabel: "shard-a"}},
		{name: "a K3s Cluster whose KThreesControlPlane says its provider removes members gets a k3s ControlPlaneEtcd in Observe", kind: "KThreesControlPlane",
			kcp:         k3sControlPlane(map[string]string{hook.EmbeddedRemovalAnnotation: hook.PreTerminateHookPrefix + "/k3s-etcd"}),
			wantBackend: v1alpha1.BackendK3s, wantMode: v1alpha1.ModeObserve, wantLabels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		{name: "a K3s Cluster whose KThreesControlPlane has no such annotation gets Manage", kind: "KThreesControlPlane", kcp: k3sControlPlane(nil),
			wantBackend: v1alpha1.BackendK3s, wantMode: v1alpha1.ModeManage, wantLabels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		{name: "an opted-out Cluster gets none", kind: "KThreesControlPlane", annotations: map[string]string{v1alpha1.OptOutAnnotation: "true"}, wantNone: true},
		{name: "an opt-out annotation other than \"true\" opts nothing out", kind: "KThreesControlPlane", annotations: map[string]string{v1alpha1.OptOutAnnotation: "false"},
			wantBackend: v1alpha1.BackendK3s, wantMode: v1alpha1.ModeManage, wantLabels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		{name: "an unknown control-plane kind gets none", kind: "MyControlPlane", wantNone: true},
		{name: "an existing ControlPlaneEtcd keeps its spec and takes the Cluster's new shard label", kind: "KThreesControlPlane",
			labels: map[string]string{clusterv1.WatchLabel: "shard-b"},
			existing: &v1alpha1.ControlPlaneEtcd{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Labels: map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.WatchLabel: "shard-a"}},
				Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c", Backend: v1alpha1.BackendRKE2, Mode: v1alpha1.ModeObserve},
			},
			wantBackend: v1alpha1.BackendRKE2, wantMode: v1alpha1.ModeObserve,
			wantLabels: map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.WatchLabel: "shard-b"}},
		{name: "an existing ControlPlaneEtcd loses the shard label the Cluster lost", kind: "KThreesControlPlane",
			existing: &v1alpha1.ControlPlaneEtcd{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Labels: map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.WatchLabel: "shard-a"}},
				Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c", Backend: v1alpha1.BackendK3s, Mode: v1alpha1.ModeManage},
			},
			wantBackend: v1alpha1.BackendK3s, wantMode: v1alpha1.ModeManage, wantLabels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			cluster := &clusterv1.Cluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "uid-c", Labels: tt.labels, Annotations: tt.annotations},
				Spec:       clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: tt.kind, Name: "c"}},
			}
			objs := []client.Object{cluster}
			if tt.existing != nil {
				objs = append(objs, tt.existing)
			}
			if tt.kcp != nil {
				objs = append(objs, tt.kcp)
			}
			if tt.etcdadm != nil {
				objs = append(objs, tt.etcdadm)
			}
			c := fake.NewClientBuilder().WithScheme(scheme()).WithIndex(&v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, ClusterNameOf).WithRESTMapper(restMapper()).WithObjects(objs...).Build()
			r := &Reconciler{Client: c}

			res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cluster)})
			g.Expect(err).NotTo(HaveOccurred())
			if tt.kind == "KubeadmControlPlane" && tt.kcp == nil && tt.etcdadm == nil {
				g.Expect(res.RequeueAfter).To(Equal(controlPlaneWaitInterval), "the KubeadmControlPlane is not watched, so the Cluster is looked at again")
			}

			cpe := &v1alpha1.ControlPlaneEtcd{}
			err = c.Get(ctx, client.ObjectKeyFromObject(cluster), cpe)
			if tt.wantNone {
				g.Expect(err).To(MatchError(ContainSubstring("not found")))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cpe.Spec.Backend).To(Equal(tt.wantBackend))
			g.Expect(cpe.Spec.Mode).To(Equal(tt.wantMode))
			g.Expect(cpe.Labels).To(Equal(tt.wantLabels))
		})
	}
}

var kcpGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"}

var etcdadmGVK = backends.EtcdadmClusterGroupKind.WithVersion("v1beta1")

var k3sGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KThreesControlPlane"}

// k3sControlPlane is KThreesControlPlane c, with the given annotations.
func k3sControlPlane(annotations map[string]string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(k3sGVK)
	obj.SetNamespace("ns")
	obj.SetName("c")
	obj.SetAnnotations(annotations)
	return obj
}

func restMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{kcpGVK.GroupVersion(), etcdadmGVK.GroupVersion()})
	m.Add(kcpGVK, meta.RESTScopeNamespace)
	m.Add(k3sGVK, meta.RESTScopeNamespace)
	m.Add(etcdadmGVK, meta.RESTScopeNamespace)
	return m
}

// etcdadmCluster is an EtcdadmCluster named name owned by the Cluster owner (uid), as the etcdadm
// controller finds its Cluster.
func etcdadmCluster(name, owner string, uid types.UID) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	obj.SetGroupVersionKind(etcdadmGVK)
	obj.SetNamespace("ns")
	obj.SetName(name)
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: owner, UID: uid}})
	return obj
}

// kcp is the KubeadmControlPlane "c" whose clusterConfiguration.etcd is etcdSpec (nil: none).
func kcp(etcdSpec map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"version": "v1.34.0"}}}
	obj.SetGroupVersionKind(kcpGVK)
	obj.SetNamespace("ns")
	obj.SetName("c")
	if etcdSpec != nil {
		utilruntime.Must(unstructured.SetNestedField(obj.Object, etcdSpec, "spec", "kubeadmConfigSpec", "clusterConfiguration", "etcd"))
	}
	return obj
}

func TestDefaultWith(t *testing.T) {
	tests := []struct {
		name     string
		kind     string
		facts    ControlPlaneFacts
		want     DefaultSpec
		wantWait bool
		// embedded: the provider removes members itself, so the mode is not the kind's.
		embedded bool
	}{
		{name: "A KubeadmControlPlane with stacked etcd gets kubeadm in Observe", kind: "KubeadmControlPlane", facts: ControlPlaneFacts{Read: true},
			want: DefaultSpec{v1alpha1.BackendKubeadm, v1alpha1.ModeObserve}},
		{name: "A KubeadmControlPlane with external etcd gets external in Observe", kind: "KubeadmControlPlane", facts: ControlPlaneFacts{Read: true, ExternalEtcd: true},
			want: DefaultSpec{v1alpha1.BackendExternal, v1alpha1.ModeObserve}},
		{name: "A KubeadmControlPlane that cannot be read yet gets nothing yet", kind: "KubeadmControlPlane", wantWait: true},
		{name: "A Cluster that owns an EtcdadmCluster gets external in Observe", kind: "KubeadmControlPlane", facts: ControlPlaneFacts{Read: true, EtcdadmCluster: true},
			want: DefaultSpec{v1alpha1.BackendExternal, v1alpha1.ModeObserve}},
		{name: "A KThreesControlPlane needs nothing read", kind: "KThreesControlPlane", want: DefaultSpec{v1alpha1.BackendK3s, v1alpha1.ModeManage}},
		{name: "A KThreesControlPlane whose provider removes members itself gets Observe", kind: "KThreesControlPlane", facts: ControlPlaneFacts{Read: true, EmbeddedRemoval: true},
			want: DefaultSpec{v1alpha1.BackendK3s, v1alpha1.ModeObserve}, embedded: true},
		{name: "An RKE2ControlPlane whose provider removes members itself gets Observe", kind: "RKE2ControlPlane", facts: ControlPlaneFacts{Read: true, EmbeddedRemoval: true},
			want: DefaultSpec{v1alpha1.BackendRKE2, v1alpha1.ModeObserve}, embedded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cluster := &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{Kind: tt.kind, Name: "c"}}}
			got, wait := DefaultWith(cluster, tt.facts)
			if tt.wantWait {
				g.Expect(wait).To(ContainSubstring("whether its etcd is stacked or external is not known"))
				return
			}
			g.Expect(wait).To(BeEmpty())
			g.Expect(got).To(Equal(tt.want))
			kindDefault, ok := DefaultFor(cluster)
			g.Expect(ok).To(BeTrue())
			if tt.embedded {
				// Note: the Machine hook webhook reads the annotation itself (machinehook decide).
				return
			}
			g.Expect(got.Mode).To(Equal(kindDefault.Mode), "the Machine hook webhook decides from DefaultFor's mode, which must not depend on the etcd")
		})
	}
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

func TestReconciler_Reconcile_makesNoTwin(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "uid-c"},
		Spec:       clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KThreesControlPlane", Name: "c"}},
	}
	mine := &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine"},
		Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c", Backend: v1alpha1.BackendK3s, Mode: v1alpha1.ModeObserve},
	}
	c := fake.NewClientBuilder().WithScheme(scheme()).WithIndex(&v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, ClusterNameOf).WithObjects(cluster, mine).Build()

	_, err := (&Reconciler{Client: c}).Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cluster)})
	g.Expect(err).NotTo(HaveOccurred())

	list := &v1alpha1.ControlPlaneEtcdList{}
	g.Expect(c.List(ctx, list)).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1), "a ControlPlaneEtcd a person made under another name is the Cluster's; no default is added next to it")
	g.Expect(list.Items[0].Name).To(Equal("mine"))
}

func TestControlPlaneEtcdOf(t *testing.T) {
	t0 := metav1.Now()
	t1 := metav1.NewTime(t0.Add(time.Minute))
	cpe := func(name, cluster string, created metav1.Time) *v1alpha1.ControlPlaneEtcd {
		return &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: created},
			Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: cluster}}
	}
	tests := []struct {
		name     string
		existing []client.Object
		want     string
	}{
		{name: "none names the Cluster", existing: []client.Object{cpe("other", "d", t0)}, want: ""},
		{name: "one under another name is the Cluster's", existing: []client.Object{cpe("mine", "c", t0)}, want: "mine"},
		{name: "of two the older is in charge, whatever the names", existing: []client.Object{cpe("a-newer", "c", t1), cpe("z-older", "c", t0)}, want: "z-older"},
		{name: "of two as old the first by name is in charge", existing: []client.Object{cpe("b", "c", t0), cpe("a", "c", t0)}, want: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := fake.NewClientBuilder().WithScheme(scheme()).WithIndex(&v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, ClusterNameOf).WithObjects(tt.existing...).Build()
			got, err := ControlPlaneEtcdOf(context.Background(), c, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}})
			g.Expect(err).NotTo(HaveOccurred())
			if tt.want == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Name).To(Equal(tt.want))
		})
	}
}
