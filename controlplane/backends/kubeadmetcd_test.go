package backends

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/external"
)

var kcpGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: KubeadmControlPlaneKind}

// kcpWithEtcd is a KubeadmControlPlane whose clusterConfiguration.etcd is etcdSpec (nil: none).
func kcpWithEtcd(etcdSpec map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"version": "v1.34.0"}}}
	obj.SetGroupVersionKind(kcpGVK)
	obj.SetNamespace("ns")
	obj.SetName("c")
	if etcdSpec != nil {
		utilruntime.Must(unstructured.SetNestedField(obj.Object, etcdSpec, "spec", "kubeadmConfigSpec", "clusterConfiguration", "etcd"))
	}
	return obj
}

func TestKubeadmEtcdOf(t *testing.T) {
	tests := []struct {
		name      string
		etcd      map[string]any
		want      KubeadmEtcd
		wantError string
	}{
		{name: "A KubeadmControlPlane with no etcd configuration runs stacked etcd", etcd: nil, want: KubeadmEtcd{}},
		{name: "A KubeadmControlPlane with local etcd runs stacked etcd", etcd: map[string]any{"local": map[string]any{"dataDir": "/var/lib/etcd"}}, want: KubeadmEtcd{}},
		{name: "A KubeadmControlPlane with external etcd gives its endpoints",
			etcd: map[string]any{"external": map[string]any{"endpoints": []any{"https://10.0.0.1:2379", "https://10.0.0.2:2379"}, "caFile": "/etc/kubernetes/pki/etcd/ca.crt"}},
			want: KubeadmEtcd{External: true, Endpoints: []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379"}}},
		{name: "External etcd without endpoints is refused, not guessed", etcd: map[string]any{"external": map[string]any{"caFile": "/ca.crt"}},
			wantError: "etcd.external lists no endpoints"},
		{name: "External endpoints that are not strings are refused", etcd: map[string]any{"external": map[string]any{"endpoints": []any{int64(1)}}},
			wantError: "is not a list of URLs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := KubeadmEtcdOf(kcpWithEtcd(tt.etcd))
			if tt.wantError != "" {
				g.Expect(err).To(MatchError(etcd.ErrInvalidInput))
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantError)))
				g.Expect(got.External).To(BeTrue(), "it is external etcd, only its endpoints are unusable")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestRegistry_For_external(t *testing.T) {
	endpoints := map[string]any{"external": map[string]any{"endpoints": []any{"https://10.0.0.1:2379"}}}
	tests := []struct {
		name      string
		kind      string
		objs      []client.Object
		wantError string
	}{
		{name: "A KubeadmControlPlane with external etcd gives a backend", kind: KubeadmControlPlaneKind, objs: []client.Object{kcpWithEtcd(endpoints)}},
		{name: "A KubeadmControlPlane that does not exist is bad input that names it", kind: KubeadmControlPlaneKind,
			wantError: "KubeadmControlPlane c of Cluster ns/c does not exist"},
		{name: "A KubeadmControlPlane with stacked etcd is bad input that names the right backend", kind: KubeadmControlPlaneKind, objs: []client.Object{kcpWithEtcd(nil)},
			wantError: "runs stacked etcd (spec.kubeadmConfigSpec.clusterConfiguration.etcd.external is not set) and the Cluster owns no EtcdadmCluster; use backend kubeadm"},
		{name: "External etcd without endpoints is bad input", kind: KubeadmControlPlaneKind,
			objs: []client.Object{kcpWithEtcd(map[string]any{"external": map[string]any{"caFile": "/ca.crt"}})}, wantError: "lists no endpoints"},
		{name: "Another control-plane kind is bad input", kind: "KThreesControlPlane", wantError: `spec.controlPlaneRef is "KThreesControlPlane" "c"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := runtime.NewScheme()
			utilruntime.Must(clusterv1.AddToScheme(s))
			mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{kcpGVK.GroupVersion()})
			mapper.Add(kcpGVK, meta.RESTScopeNamespace)
			r := &Registry{Client: fake.NewClientBuilder().WithScheme(s).WithObjects(tt.objs...).Build(), RESTMapper: mapper}
			cluster := &clusterv1.Cluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "uid-c"},
				Spec:       clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: kcpGVK.Group, Kind: tt.kind, Name: "c"}},
			}
			got, err := r.For(context.Background(), cluster, v1alpha1.BackendExternal)
			if tt.wantError != "" {
				g.Expect(err).To(MatchError(etcd.ErrInvalidInput))
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantError)))
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(BeAssignableToTypeOf(&external.Backend{}))
			again, err := r.For(context.Background(), cluster, v1alpha1.BackendExternal)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(BeIdenticalTo(got), "the backend and its connections are kept while the endpoints do not change")
			g.Expect(r.Forget(cluster.UID)).To(Succeed())
		})
	}
}
