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
	k8stypes "k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/external"
)

var etcdadmGVK = EtcdadmClusterGroupKind.WithVersion("v1beta1")

// etcdadmCluster is an EtcdadmCluster named name, owned by the Cluster ownerName (uid ownerUID;
// none when ownerName is empty), whose status.endpoints is endpoints (absent when nil).
func etcdadmCluster(name, ownerName, ownerUID string, endpoints any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(3)}}}
	obj.SetGroupVersionKind(etcdadmGVK)
	obj.SetNamespace("ns")
	obj.SetName(name)
	if ownerName != "" {
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: ownerName, UID: k8stypes.UID("uid-" + ownerUID)}})
	}
	if endpoints != nil {
		utilruntime.Must(unstructured.SetNestedField(obj.Object, endpoints, "status", "endpoints"))
	}
	return obj
}

// etcdMachine is an etcd Machine of the EtcdadmCluster etcdCluster of Cluster cluster, at addrs.
func etcdMachine(name, cluster, etcdCluster string, addrs ...string) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster, EtcdClusterLabel: etcdCluster}}}
	for _, a := range addrs {
		m.Status.Addresses = append(m.Status.Addresses, clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: a})
	}
	return m
}

func TestRegistry_For_etcdadm(t *testing.T) {
	stacked := kcpWithEtcd(nil)
	tests := []struct {
		name          string
		objs          []client.Object
		wantEndpoints string
		wantError     string
	}{
		{name: "A Cluster that owns an EtcdadmCluster is reached at its status.endpoints, whatever its KubeadmControlPlane says",
			objs:          []client.Object{stacked, etcdadmCluster("c-etcd", "c", "c", "https://10.0.0.2:2379,https://10.0.0.1:2379")},
			wantEndpoints: "https://10.0.0.2:2379,https://10.0.0.1:2379|"},
		{name: "The addresses of its etcd Machines are the hosts its members may be asked at besides, once each; other Machines' are not",
			objs: []client.Object{stacked, etcdadmCluster("c-etcd", "c", "c", "https://10.0.0.1:2379"),
				etcdMachine("e1", "c", "c-etcd", "10.0.0.1", "e1.internal"), etcdMachine("e2", "c", "c-etcd", "10.0.0.3", "10.0.0.1"),
				etcdMachine("other-etcd", "c", "d-etcd", "10.9.0.1"), etcdMachine("other-cluster", "d", "c-etcd", "10.9.0.2")},
			wantEndpoints: "https://10.0.0.1:2379|10.0.0.1,10.0.0.3,e1.internal"},
		{name: "An EtcdadmCluster with no status.endpoints yet is bad input that says so",
			objs: []client.Object{stacked, etcdadmCluster("c-etcd", "c", "c", nil)}, wantError: "EtcdadmCluster ns/c-etcd has no status.endpoints yet"},
		{name: "An EtcdadmCluster with empty status.endpoints is bad input",
			objs: []client.Object{stacked, etcdadmCluster("c-etcd", "c", "c", " , ")}, wantError: "has no status.endpoints yet"},
		{name: "An EtcdadmCluster whose status.endpoints is not a string is bad input",
			objs: []client.Object{stacked, etcdadmCluster("c-etcd", "c", "c", int64(1))}, wantError: "status.endpoints is not a comma-separated string"},
		{name: "Two EtcdadmClusters owned by the Cluster are bad input naming both, not a guess",
			objs:      []client.Object{stacked, etcdadmCluster("a", "c", "c", "https://10.0.0.1:2379"), etcdadmCluster("b", "c", "c", "https://10.0.0.2:2379")},
			wantError: "Cluster ns/c owns 2 EtcdadmClusters (a, b)"},
		{name: "An EtcdadmCluster owned by another Cluster of the same name (another UID) is not the Cluster's",
			objs: []client.Object{stacked, etcdadmCluster("c-etcd", "c", "old", "https://10.0.0.1:2379")}, wantError: "runs stacked etcd"},
		{name: "An EtcdadmCluster owned by another Cluster is not the Cluster's",
			objs: []client.Object{stacked, etcdadmCluster("d-etcd", "d", "d", "https://10.0.0.1:2379")}, wantError: "and the Cluster owns no EtcdadmCluster"},
		{name: "A gone EtcdadmCluster leaves the KubeadmControlPlane's endpoints, and says neither gives any",
			objs: []client.Object{stacked}, wantError: "runs stacked etcd (spec.kubeadmConfigSpec.clusterConfiguration.etcd.external is not set) and the Cluster owns no EtcdadmCluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := runtime.NewScheme()
			utilruntime.Must(clusterv1.AddToScheme(s))
			mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{kcpGVK.GroupVersion(), etcdadmGVK.GroupVersion()})
			mapper.Add(kcpGVK, meta.RESTScopeNamespace)
			mapper.Add(etcdadmGVK, meta.RESTScopeNamespace)
			r := &Registry{Client: fake.NewClientBuilder().WithScheme(s).WithObjects(tt.objs...).Build(), RESTMapper: mapper}
			cluster := &clusterv1.Cluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "uid-c"},
				Spec:       clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: kcpGVK.Group, Kind: KubeadmControlPlaneKind, Name: "c"}},
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
			g.Expect(r.entries[cluster.UID].endpoints).To(Equal(tt.wantEndpoints))
			g.Expect(r.Forget(cluster.UID)).To(Succeed())
		})
	}
}
