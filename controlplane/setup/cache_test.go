package setup

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
)

func TestTrimMachine(t *testing.T) {
	now := metav1.Now()
	// machine is a Machine as the apiserver serves it, with the given labels.
	machine := func(labels map[string]string) *clusterv1.Machine {
		return &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "ns", Name: "m-0", UID: "uid-0", ResourceVersion: "7", Generation: 2, DeletionTimestamp: &now,
				Labels:          labels,
				Annotations:     map[string]string{v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue},
				Finalizers:      []string{clusterv1.MachineFinalizer},
				OwnerReferences: []metav1.OwnerReference{{Kind: "MachineSet", Name: "md-0-x"}},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "manager"}},
			},
			Spec: clusterv1.MachineSpec{ClusterName: "c", ProviderID: "test://m-0", Version: "v1.34.2"},
			Status: clusterv1.MachineStatus{
				NodeRef:   clusterv1.MachineNodeReference{Name: "node-0"},
				Addresses: clusterv1.MachineAddresses{{Type: clusterv1.MachineInternalIP, Address: "10.0.0.1"}},
			},
		}
	}
	// withoutManagedFields is m with its managed fields stripped.
	withoutManagedFields := func(m *clusterv1.Machine) *clusterv1.Machine {
		m.ManagedFields = nil
		return m
	}
	cp := map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.MachineControlPlaneLabel: ""}
	etcd := map[string]string{clusterv1.ClusterNameLabel: "c", backends.EtcdClusterLabel: "c-etcd"}
	worker := map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.MachineDeploymentNameLabel: "md-0", clusterv1.MachineSetNameLabel: "md-0-x"}
	trimmedWorker := func() *clusterv1.Machine {
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "m-0", UID: "uid-0", ResourceVersion: "7", Generation: 2, DeletionTimestamp: &now, Labels: worker,
		}}
	}
	tombstone := toolscache.DeletedFinalStateUnknown{Key: "ns/m-0", Obj: trimmedWorker()}
	tests := []struct {
		name string
		in   any
		want any
	}{
		{name: "A control-plane Machine is kept whole but for its managed fields", in: machine(cp), want: withoutManagedFields(machine(cp))},
		{name: "An etcdadm etcd Machine is kept whole but for its managed fields", in: machine(etcd), want: withoutManagedFields(machine(etcd))},
		{name: "A worker Machine keeps its identity, resource version, deletion timestamp and labels, and loses the rest", in: machine(worker), want: trimmedWorker()},
		{name: "A trimmed worker Machine trimmed again stays as it is", in: trimmedWorker(), want: trimmedWorker()},
		{name: "An object that is not a Machine is returned unchanged", in: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"a": "b"}}}, want: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"a": "b"}}}},
		{name: "A deletion tombstone is returned unchanged", in: tombstone, want: tombstone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := TrimMachine(tt.in)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}
