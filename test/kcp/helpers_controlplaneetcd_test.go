package kcp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// observationInterval is what the test sets as the ControlPlaneEtcd's spec.observationInterval
// (default 30s): a member that stops raises no Machine or Node event, and the status shows it
// at the next observation.
const observationInterval = 5 * time.Second

// cpeView is what the ControlPlaneEtcd's status said when a view was read.
type cpeView struct {
	found          bool
	cluster        metav1.Condition
	members        []string
	leader         string
	health         map[string]v1alpha1.EtcdMemberStatus
	voters         int32
	healthyVoters  int32
	faultTolerance *int32
}

func newCPEView(cpe *v1alpha1.ControlPlaneEtcd) cpeView {
	v := cpeView{health: map[string]v1alpha1.EtcdMemberStatus{}}
	if cpe == nil {
		return v
	}
	v.found = true
	if c := conditions.Get(cpe, v1alpha1.EtcdClusterHealthyCondition); c != nil {
		v.cluster = *c
	}
	for _, m := range cpe.Status.Members {
		v.members = append(v.members, m.Name)
		v.health[m.Name] = m
	}
	slices.Sort(v.members)
	v.leader = cpe.Status.Leader
	v.voters, v.healthyVoters = ptr.Deref(cpe.Status.Voters, 0), ptr.Deref(cpe.Status.HealthyVoters, 0)
	v.faultTolerance = cpe.Status.FaultTolerance
	return v
}

// describe lists the members with role, health and reason, and the counts.
func (v cpeView) describe() string {
	if !v.found {
		return "no ControlPlaneEtcd"
	}
	var out []string
	for _, n := range v.members {
		m := v.health[n]
		s := fmt.Sprintf("%s(%s %s", n, m.Role, m.Health)
		if m.Reason != "" {
			s += "/" + m.Reason
		}
		if m.Message != "" {
			s += ": " + oneLine(m.Message)
		}
		if len(m.Alarms) > 0 {
			s += fmt.Sprintf(" alarms %v", m.Alarms)
		}
		out = append(out, s+")")
	}
	ft := "unset"
	if v.faultTolerance != nil {
		ft = fmt.Sprint(*v.faultTolerance)
	}
	return fmt.Sprintf("%s; leader %q; healthy voters %d of %d; fault tolerance %s", strings.Join(out, " "), v.leader, v.healthyVoters, v.voters, ft)
}

// controlPlaneEtcd returns the Cluster's ControlPlaneEtcd (same name as the Cluster), or nil.
func (o *observer) controlPlaneEtcd(ctx context.Context) (*v1alpha1.ControlPlaneEtcd, error) {
	cpe := &v1alpha1.ControlPlaneEtcd{}
	if err := o.e.Management.Client.Get(ctx, client.ObjectKeyFromObject(o.e.Cluster), cpe); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return cpe, nil
}

// adoptControlPlaneEtcd waits for the ControlPlaneEtcd etcd-adapter's creation controller makes
// for a KubeadmControlPlane Cluster, checks it is the one KCP needs beside it (backend kubeadm,
// mode Observe, owned by the Cluster) and sets its observation interval.
func adoptControlPlaneEtcd(ctx context.Context, g Gomega, o *observer) {
	var cpe *v1alpha1.ControlPlaneEtcd
	g.Eventually(func(g Gomega) {
		var err error
		cpe, err = o.controlPlaneEtcd(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cpe).NotTo(BeNil())
	}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	g.Expect(cpe.Spec.ClusterName).To(Equal(o.e.Cluster.Name))
	g.Expect(cpe.Spec.Backend).To(Equal(v1alpha1.BackendKubeadm))
	g.Expect(cpe.Spec.Mode).To(Equal(v1alpha1.ModeObserve))
	g.Expect(cpe.OwnerReferences).To(ContainElement(HaveField("Name", o.e.Cluster.Name)))
	fmt.Printf("[create] etcd-adapter created ControlPlaneEtcd %s/%s: backend %s, mode %s; the test sets spec.observationInterval %v\n",
		cpe.Namespace, cpe.Name, cpe.Spec.Backend, cpe.Spec.Mode, observationInterval)
	patch := client.MergeFrom(cpe.DeepCopy())
	cpe.Spec.ObservationInterval = &metav1.Duration{Duration: observationInterval}
	g.Expect(o.e.Management.Client.Patch(ctx, cpe, patch)).To(Succeed())
}

// expectNoAdapterHooks asserts that no KCP Machine carries an etcd-adapter annotation (its
// pre-terminate hook above all): in Observe mode KCP's own kcp-cleanup hook removes members,
// and etcd-adapter's mutating webhook and controller must leave KCP's Machines alone.
func expectNoAdapterHooks(ctx context.Context, g Gomega, o *observer) {
	for _, m := range o.machines(ctx, g) {
		g.Expect(m.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation), "Machine %s", m.Name)
		g.Expect(m.Annotations).To(HaveKey(v1alpha1.KCPHookAnnotation), "Machine %s", m.Name)
		for k := range m.Annotations {
			g.Expect(k).NotTo(ContainSubstring("etcd-adapter"), "Machine %s", m.Name)
		}
	}
}

// settledCPE reports whether the ControlPlaneEtcd shows exactly the given members and the same
// EtcdClusterHealthy as KCP.
func settledCPE(v view, machines []string) bool {
	return slices.Equal(v.cpe.members, machines) && slices.Equal(v.machines, machines) && same(v.cpe.cluster, v.kcpCluster)
}

// machineCondition returns the Machine's condition, or a zero one.
func machineCondition(m *clusterv1.Machine, t string) metav1.Condition {
	if c := conditions.Get(m, t); c != nil {
		return *c
	}
	return metav1.Condition{Type: t}
}
