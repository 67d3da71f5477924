package quorumguard

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	etcdfake "github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
)

var etcdadmGVK = backends.EtcdadmClusterGroupKind.WithVersion("v1beta1")

// etcdadmSnapshot is healthy(n) as an etcdadm etcd: members named after their hosts (not after
// Machines), on no Node, peer URL https://10.0.0.<i>:2380.
func etcdadmSnapshot(n int) *etcd.Snapshot {
	s := healthy(n)
	for i := range s.Members {
		s.Members[i].Name, s.Members[i].NodeName = fmt.Sprintf("etcd-host-%d", i), ""
		s.Members[i].PeerURLs = []string{fmt.Sprintf("https://10.0.0.%d:2380", i)}
		s.Evidence[i].NodeName = ""
		s.Evidence[i].Members = s.Members
	}
	return s
}

// etcdMachine is the etcd Machine e-<i> of EtcdadmCluster ec, as the etcdadm controller labels it,
// at address 10.0.0.<i>, with no Node.
func etcdMachine(i int, ec string) *clusterv1.Machine {
	return &clusterv1.Machine{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("e-%d", i),
			Labels: map[string]string{clusterv1.ClusterNameLabel: "c", backends.EtcdClusterLabel: ec}},
		Spec: clusterv1.MachineSpec{ClusterName: "c"},
		Status: clusterv1.MachineStatus{Addresses: clusterv1.MachineAddresses{
			{Type: clusterv1.MachineInternalIP, Address: fmt.Sprintf("10.0.0.%d", i)}}},
	}
}

func TestGuard_etcdadm(t *testing.T) {
	removedFirst := func() *etcd.Snapshot {
		// The etcdadm controller removed e-0's member by its peer URL before deleting e-0
		// (controllers/scale.go removeEtcdMemberAndDeleteMachine); e-2's member is down.
		s := etcdadmSnapshot(3)
		s.Members, s.Evidence = s.Members[1:], s.Evidence[1:]
		for i := range s.Evidence {
			s.Evidence[i].Members = s.Members
		}
		s.LeaderID = 2
		return broken(s, 1)
	}
	tests := []struct {
		name        string
		snapshot    func() *etcd.Snapshot
		observeErr  error
		machines    int
		delete      *clusterv1.Machine
		ecDeleting  bool
		wantAllowed bool
		wantMessage string
		wantWarning string
	}{
		{name: "Deleting an etcd Machine whose member is healthy while another member is down is refused",
			snapshot: func() *etcd.Snapshot { return broken(etcdadmSnapshot(3), 1) }, machines: 3, delete: etcdMachine(0, "c-etcd"),
			wantMessage: "deleting Machine e-0 would lose etcd quorum of Cluster c"},
		{name: "Deleting the etcd Machine of the member that is down is allowed",
			snapshot: func() *etcd.Snapshot { return broken(etcdadmSnapshot(3), 1) }, machines: 3, delete: etcdMachine(1, "c-etcd"), wantAllowed: true},
		{name: "Deleting an etcd Machine whose member the etcdadm controller already removed is allowed, whatever the others' health",
			snapshot: removedFirst, machines: 3, delete: etcdMachine(0, "c-etcd"), wantAllowed: true},
		{name: "Deleting the etcd Machine of the last member is refused",
			snapshot: func() *etcd.Snapshot { return etcdadmSnapshot(1) }, machines: 1, delete: etcdMachine(0, "c-etcd"),
			wantMessage: "would remove the last etcd member of Cluster c"},
		{name: "Deleting the last etcd Machine with an address while etcd cannot be observed is refused",
			observeErr: fmt.Errorf("%w: connection refused", etcd.ErrUnreachable), machines: 1, delete: etcdMachine(0, "c-etcd"),
			wantMessage: "every other etcd Machine with an address is being deleted"},
		{name: "Deleting one of several etcd Machines while etcd cannot be observed is let through with a warning",
			observeErr: fmt.Errorf("%w: connection refused", etcd.ErrUnreachable), machines: 3, delete: etcdMachine(0, "c-etcd"),
			wantAllowed: true, wantWarning: "etcd of Cluster c could not be observed"},
		{name: "An etcd Machine of an EtcdadmCluster the Cluster does not own is let through",
			snapshot: func() *etcd.Snapshot { return broken(etcdadmSnapshot(3), 1) }, machines: 3, delete: etcdMachine(0, "other-etcd"), wantAllowed: true},
		{name: "The etcd Machines of an EtcdadmCluster being deleted are let through, as the etcdadm controller deletes them all",
			snapshot: func() *etcd.Snapshot { return broken(etcdadmSnapshot(3), 1) }, machines: 3, delete: etcdMachine(0, "c-etcd"), ecDeleting: true, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			backend := &etcdfake.Cluster{ObserveError: tt.observeErr}
			if tt.snapshot != nil {
				backend.ObserveResponse = tt.snapshot()
			}
			rec := &recorder{}
			guard := newGuard(backend, rec)
			cpe := &v1alpha1.ControlPlaneEtcd{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
				Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c", Backend: v1alpha1.BackendExternal, Mode: v1alpha1.ModeObserve},
			}
			ec := &unstructured.Unstructured{Object: map[string]any{}}
			ec.SetGroupVersionKind(etcdadmGVK)
			ec.SetNamespace("ns")
			ec.SetName("c-etcd")
			ec.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "c"}})
			if tt.ecDeleting {
				ec.SetFinalizers([]string{"etcdcluster.cluster.x-k8s.io"})
				ec.SetDeletionTimestamp(&metav1.Time{Time: metav1.Now().Time})
			}
			objs := []client.Object{cluster(), cpe, ec}
			for i := range tt.machines {
				objs = append(objs, etcdMachine(i, "c-etcd"))
			}
			mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{controlplanev1.GroupVersion, etcdadmGVK.GroupVersion()})
			mapper.Add(controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"), meta.RESTScopeNamespace)
			mapper.Add(etcdadmGVK, meta.RESTScopeNamespace)
			c := fake.NewClientBuilder().WithScheme(testScheme()).WithIndex(&v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, creation.ClusterNameOf).WithRESTMapper(mapper).WithObjects(objs...).Build()
			guard.Client, guard.APIReader, guard.Writer, guard.RESTMapper = c, c, c, mapper

			resp := guard.Handle(context.Background(), deleteRequest(g, tt.delete, false))

			g.Expect(resp.Allowed).To(Equal(tt.wantAllowed), "%v", resp.Result)
			if !tt.wantAllowed {
				g.Expect(resp.Result.Message).To(ContainSubstring(tt.wantMessage))
				return
			}
			if tt.wantWarning != "" {
				g.Expect(resp.Warnings).To(ConsistOf(ContainSubstring(tt.wantWarning)))
				return
			}
			g.Expect(resp.Warnings).To(BeEmpty())
		})
	}
}
