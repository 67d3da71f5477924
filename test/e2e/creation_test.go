package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

var _ = Describe("ControlPlaneEtcd creation", func() {
	It("creates one per Cluster of a known control-plane kind, owned by the Cluster, unless the Cluster opts out", func(ctx SpecContext) {
		ns := createNamespace(ctx)
		newCluster := func(name, kind string, annotations map[string]string) *clusterv1.Cluster {
			c := &clusterv1.Cluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
				Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: "controlplane.cluster.x-k8s.io", Kind: kind, Name: name}},
			}
			Expect(mgmt.Client.Create(ctx, c)).To(Succeed())
			return c
		}
		optOut := newCluster("opted-out", "KThreesControlPlane", map[string]string{v1alpha1.OptOutAnnotation: "true"})
		notOptedOut := newCluster("opt-out-false", "KThreesControlPlane", map[string]string{v1alpha1.OptOutAnnotation: "false"})
		externalEtcd := map[string]any{"external": map[string]any{"endpoints": []any{"https://etcd-0.example:2379"},
			"caFile": "/etc/kubernetes/pki/etcd/ca.crt", "certFile": "/etc/kubernetes/pki/apiserver-etcd-client.crt", "keyFile": "/etc/kubernetes/pki/apiserver-etcd-client.key"}}
		cases := []struct {
			kind    string
			backend v1alpha1.Backend
			mode    v1alpha1.Mode
			// kcp, when set, creates the KubeadmControlPlane with this clusterConfiguration.etcd.
			kcp map[string]any
		}{
			{"KubeadmControlPlane", v1alpha1.BackendKubeadm, v1alpha1.ModeObserve, map[string]any{"local": map[string]any{"dataDir": "/var/lib/etcd"}}},
			{"KubeadmControlPlane", v1alpha1.BackendExternal, v1alpha1.ModeObserve, externalEtcd},
			{"KThreesControlPlane", v1alpha1.BackendK3s, v1alpha1.ModeManage, nil},
			{"RKE2ControlPlane", v1alpha1.BackendRKE2, v1alpha1.ModeManage, nil},
		}
		By("a KubeadmControlPlane Cluster whose KubeadmControlPlane does not exist yet gets none until it does: its etcd may be external")
		waiting := newCluster("c-waiting", "KubeadmControlPlane", nil)
		Consistently(func() bool { return apierrors.IsNotFound(getControlPlaneEtcd(ctx, waiting)) }, 5*time.Second, time.Second).Should(BeTrue())
		createKubeadmControlPlane(ctx, ns, waiting.Name, nil)
		Eventually(func() error { return getControlPlaneEtcd(ctx, waiting) }, reconcileTimeout).Should(Succeed())
		for _, tc := range cases {
			By(fmt.Sprintf("a %s Cluster gets backend %s in mode %s", tc.kind, tc.backend, tc.mode))
			name := "c-" + string(tc.backend)
			if tc.kcp != nil {
				createKubeadmControlPlane(ctx, ns, name, tc.kcp)
			}
			cluster := newCluster(name, tc.kind, nil)
			cpe := &v1alpha1.ControlPlaneEtcd{}
			Eventually(func() error {
				return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cpe)
			}, reconcileTimeout).Should(Succeed())
			Expect(cpe.Spec.ClusterName).To(Equal(cluster.Name))
			Expect(cpe.Spec.Backend).To(Equal(tc.backend))
			Expect(cpe.Spec.Mode).To(Equal(tc.mode))
			Expect(cpe.OwnerReferences).To(ContainElement(HaveField("UID", cluster.UID)))
		}
		By("an opt-out annotation acts on \"true\" only, like every other annotation of etcd-adapter")
		Eventually(func() error { return getControlPlaneEtcd(ctx, notOptedOut) }, reconcileTimeout).Should(Succeed())
		Expect(apierrors.IsNotFound(getControlPlaneEtcd(ctx, optOut))).To(BeTrue(), "a Cluster that opts out gets no ControlPlaneEtcd")
	}, SpecTimeout(2*time.Minute))
})

func getControlPlaneEtcd(ctx context.Context, cluster *clusterv1.Cluster) error {
	return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), &v1alpha1.ControlPlaneEtcd{})
}
