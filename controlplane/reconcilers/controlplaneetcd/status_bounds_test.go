package controlplaneetcd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Test_setStatus_largestIsAccepted writes the largest status a hostile workload cluster can
// cause to a real apiserver: as many members as a member list may have (etcd.MaxMembers), each
// with the longest name the bounds let through, on a Machine with the longest name Kubernetes
// allows, each unreachable with the longest error text a backend keeps (the backends make what
// a member or kubelet answers one printable line of etcd.MaxTextBytes where it comes in:
// pkg/internal/membership, pkg/k3s, pkg/kubeadm/internal/portforward). The apiserver must
// accept it: a status it refused would freeze the Cluster's reporting.
func Test_setStatus_largestIsAccepted(t *testing.T) {
	g := NewWithT(t)
	mgmt := managementCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	down := make([]int, 0, etcd.MaxMembers)
	for i := range etcd.MaxMembers {
		down = append(down, i)
	}
	s := testScope(etcd.MaxMembers, down...)
	hostileError := etcd.SanitizeText(strings.Repeat("refused\x1b[2J\r\n* Member forged: healthy\t", (1<<20)/40), etcd.MaxTextBytes)
	for i := range s.snapshot.Members {
		name := fmt.Sprintf("%03d-%s", i, strings.Repeat("n", etcd.MaxMemberNameBytes-4))
		machine := fmt.Sprintf("%03d-%s", i, strings.Repeat("m", 253-4))
		s.snapshot.Members[i].Name, s.snapshot.Members[i].NodeName = name, name
		s.snapshot.Evidence[i].NodeName, s.snapshot.Evidence[i].Error = name, hostileError
		s.machines[i].Name, s.machines[i].Status.NodeRef.Name = machine, name
	}
	s.cpe.Namespace, s.cpe.Name = "largest-status", "largest"
	s.cpe.Spec = v1alpha1.ControlPlaneEtcdSpec{ClusterName: "largest", Backend: v1alpha1.BackendKubeadm, Mode: v1alpha1.ModeManage}
	setStatus(s)
	g.Expect(s.cpe.Status.Members).To(HaveLen(etcd.MaxMembers))

	g.Expect(mgmt.direct.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.cpe.Namespace}})).To(Succeed())
	st := *s.cpe.Status.DeepCopy()
	s.cpe.Status = v1alpha1.ControlPlaneEtcdStatus{}
	g.Expect(mgmt.direct.Create(ctx, s.cpe)).To(Succeed())
	s.cpe.Status = st
	g.Expect(mgmt.direct.Status().Update(ctx, s.cpe)).To(Succeed(), "the apiserver refused the largest status")

	got := &v1alpha1.ControlPlaneEtcd{}
	g.Expect(mgmt.direct.Get(ctx, client.ObjectKeyFromObject(s.cpe), got)).To(Succeed())
	g.Expect(got.Status.Members).To(HaveLen(etcd.MaxMembers))
	for _, m := range got.Status.Members {
		g.Expect(m.Health).To(Equal(v1alpha1.MemberUnhealthy))
		g.Expect(len(m.Message)).To(BeNumerically("<=", etcd.MaxMemberMessageBytes))
	}
	for _, c := range got.Status.Conditions {
		g.Expect(len(c.Message)).To(BeNumerically("<=", etcd.MaxConditionMessageBytes), "condition %s", c.Type)
	}
}
