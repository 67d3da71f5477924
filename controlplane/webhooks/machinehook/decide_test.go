package machinehook

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

func Test_decide(t *testing.T) {
	cluster := func(kind string, annotations map[string]string, deleting bool) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: annotations}}
		c.Spec.ControlPlaneRef.Kind = kind
		if deleting {
			c.DeletionTimestamp = new(metav1.Now())
		}
		return c
	}
	cpe := func(mode v1alpha1.Mode) *v1alpha1.ControlPlaneEtcd {
		return &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c", Mode: mode}}
	}
	external := func(mode v1alpha1.Mode) *v1alpha1.ControlPlaneEtcd {
		c := cpe(mode)
		c.Spec.Backend = v1alpha1.BackendExternal
		return c
	}
	optOut := map[string]string{v1alpha1.OptOutAnnotation: "true"}
	ofOwned := &etcdMachineFacts{etcdCluster: "c-etcd", owned: "c-etcd"}
	tests := []struct {
		name     string
		cluster  *clusterv1.Cluster
		cpe      *v1alpha1.ControlPlaneEtcd
		other    bool
		etcd     *etcdMachineFacts
		embedded bool
		wantHook bool
		wantWarn bool
	}{
		{name: "a KThreesControlPlane whose provider removes members itself: no hook", cluster: cluster("KThreesControlPlane", nil, false), embedded: true},
		{name: "a provider that removes members itself wins over a ControlPlaneEtcd in Manage", cluster: cluster("KThreesControlPlane", nil, false), cpe: cpe(v1alpha1.ModeManage), embedded: true},
		{name: "KThreesControlPlane with no ControlPlaneEtcd yet: Manage by default", cluster: cluster("KThreesControlPlane", nil, false), wantHook: true},
		{name: "RKE2ControlPlane with no ControlPlaneEtcd yet: Manage by default", cluster: cluster("RKE2ControlPlane", nil, false), wantHook: true},
		{name: "KubeadmControlPlane with no ControlPlaneEtcd yet: Observe by default", cluster: cluster("KubeadmControlPlane", nil, false)},
		{name: "an opted-out KThreesControlPlane Cluster with no ControlPlaneEtcd", cluster: cluster("KThreesControlPlane", optOut, false)},
		{name: "an unknown kind with no ControlPlaneEtcd", cluster: cluster("MyControlPlane", nil, false)},
		{name: "a ControlPlaneEtcd in Manage wins over an unknown kind", cluster: cluster("MyControlPlane", nil, false), cpe: cpe(v1alpha1.ModeManage), wantHook: true},
		{name: "a ControlPlaneEtcd in Manage wins over the opt-out (it was created before)", cluster: cluster("KThreesControlPlane", optOut, false), cpe: cpe(v1alpha1.ModeManage), wantHook: true},
		{name: "a ControlPlaneEtcd of external etcd gives no hook even in Manage (its members run on no control-plane Machine)", cluster: cluster("MyControlPlane", nil, false),
			cpe: external(v1alpha1.ModeManage)},
		{name: "a ControlPlaneEtcd in Observe wins over the K3s default", cluster: cluster("KThreesControlPlane", nil, false), cpe: cpe(v1alpha1.ModeObserve)},
		{name: "a deleting Cluster gets no hook even in Manage", cluster: cluster("KThreesControlPlane", nil, true), cpe: cpe(v1alpha1.ModeManage)},
		{name: "another shard's K3s Cluster with a ControlPlaneEtcd in Manage: a manager handles it, so the hook", cluster: cluster("KThreesControlPlane", nil, false), cpe: cpe(v1alpha1.ModeManage), other: true, wantHook: true},
		{name: "another shard's K3s Cluster with no ControlPlaneEtcd: no hook (no manager is known to release it), with a warning", cluster: cluster("KThreesControlPlane", nil, false), other: true, wantWarn: true},
		{name: "another shard's Cluster with a ControlPlaneEtcd in Observe", cluster: cluster("KThreesControlPlane", nil, false), cpe: cpe(v1alpha1.ModeObserve), other: true},
		{name: "an etcd Machine of a Cluster whose external ControlPlaneEtcd is in Manage gets the hook", cluster: cluster("KubeadmControlPlane", nil, false), cpe: external(v1alpha1.ModeManage), etcd: ofOwned, wantHook: true},
		{name: "an etcd Machine of a Cluster whose external ControlPlaneEtcd is in Observe gets no hook", cluster: cluster("KubeadmControlPlane", nil, false), cpe: external(v1alpha1.ModeObserve), etcd: ofOwned},
		{name: "an etcd Machine of a Cluster with no ControlPlaneEtcd yet gets no hook (Observe by default)", cluster: cluster("KubeadmControlPlane", nil, false), etcd: ofOwned},
		{name: "an etcd Machine of a Cluster whose ControlPlaneEtcd in Manage is not external gets no hook", cluster: cluster("KThreesControlPlane", nil, false), cpe: cpe(v1alpha1.ModeManage), etcd: ofOwned},
		{name: "an etcd Machine of a deleting Cluster gets no hook", cluster: cluster("KubeadmControlPlane", nil, true), cpe: external(v1alpha1.ModeManage), etcd: ofOwned},
		{name: "an etcd Machine of an EtcdadmCluster its Cluster does not own gets no hook (no manager would release it), with a warning", cluster: cluster("KubeadmControlPlane", nil, false), cpe: external(v1alpha1.ModeManage),
			etcd: &etcdMachineFacts{etcdCluster: "other-etcd", owned: "c-etcd"}, wantWarn: true},
		{name: "an etcd Machine of a Cluster that owns no EtcdadmCluster gets no hook, with a warning", cluster: cluster("KubeadmControlPlane", nil, false), cpe: external(v1alpha1.ModeManage),
			etcd: &etcdMachineFacts{etcdCluster: "c-etcd"}, wantWarn: true},
		{name: "another shard's etcd Machine with an external ControlPlaneEtcd in Manage: a manager handles it, so the hook", cluster: cluster("KubeadmControlPlane", nil, false), cpe: external(v1alpha1.ModeManage), etcd: ofOwned, other: true, wantHook: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			d := decide(tt.cluster, tt.cpe, !tt.other, tt.etcd, tt.embedded)
			g.Expect(d.addHook).To(Equal(tt.wantHook), d.why)
			g.Expect(d.why).NotTo(BeEmpty())
			g.Expect(d.warning != "").To(Equal(tt.wantWarn), d.warning)
		})
	}
}
