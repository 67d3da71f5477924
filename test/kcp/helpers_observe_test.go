package kcp

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/collections"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/capimachine"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm"
	kcpenv "github.com/etcd-adapter/etcd-adapter/test/env/kcp"
)

// observer reads etcd-adapter's view two ways: the real ControlPlaneEtcd status the running
// controllers write, and etcd-adapter's two calls made directly (the kubeadm backend's Observe
// and etcd.AssessHealth over KCP's Machines), which shows what a fresh observation says at the
// moment KCP's side is read.
type observer struct {
	e       *kcpenv.Env
	backend *kubeadm.Backend
}

func newObserver(g Gomega, e *kcpenv.Env) *observer {
	b, err := kubeadm.New(kubeadm.Config{
		Cluster:    client.ObjectKeyFromObject(e.Cluster),
		ClusterUID: e.Cluster.UID,
		RESTConfig: kubeadm.StaticRESTConfig(e.WorkloadConfig()),
		Client:     e.Management.Client,
	})
	g.Expect(err).NotTo(HaveOccurred())
	return &observer{e: e, backend: b}
}

// view is one side-by-side reading: KCP's conditions, the ControlPlaneEtcd's status and
// etcd-adapter's fresh verdict on the same Machines, and the member list etcd-adapter saw.
type view struct {
	kcpCluster  metav1.Condition
	kcpMachines map[string]metav1.Condition
	cpe         cpeView
	adapter     etcd.HealthVerdict
	members     []string
	machines    []string
	deleting    []string
	at          time.Time
	observedAt  time.Time
	observeErr  error
}

// read lists KCP's Machines and reads KCP's conditions, then observes etcd and assesses it.
func (o *observer) read(ctx context.Context, g Gomega) view {
	v, err := o.tryRead(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	return v
}

// tryRead is read for a background sampler, which must not fail the test from its goroutine.
func (o *observer) tryRead(ctx context.Context) (view, error) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := o.e.Management.Client.Get(ctx, client.ObjectKeyFromObject(o.e.Cluster), kcp); err != nil {
		return view{}, err
	}
	machines, err := o.listMachines(ctx)
	if err != nil {
		return view{}, err
	}
	v := view{kcpMachines: map[string]metav1.Condition{}, at: time.Now()}
	if c := conditions.Get(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition); c != nil {
		v.kcpCluster = *c
	}
	cpe, err := o.controlPlaneEtcd(ctx)
	if err != nil {
		return view{}, err
	}
	v.cpe = newCPEView(cpe)
	var facts []etcd.Machine
	for _, m := range machines {
		if c := conditions.Get(m, controlplanev1.KubeadmControlPlaneMachineEtcdMemberHealthyCondition); c != nil {
			v.kcpMachines[m.Name] = *c
		}
		facts = append(facts, capimachine.Facts(m))
	}
	snap, err := o.backend.Observe(ctx)
	v.observeErr = err
	if snap != nil {
		v.observedAt = snap.ObservedAt
		for _, m := range snap.Members {
			v.members = append(v.members, m.Name)
		}
		slices.Sort(v.members)
	}
	v.adapter = etcd.AssessHealth(etcd.HealthInput{Snapshot: snap, ObserveErr: err, Machines: facts, Now: time.Now()})
	for _, m := range machines {
		v.machines = append(v.machines, m.Name)
		if !m.DeletionTimestamp.IsZero() {
			v.deleting = append(v.deleting, m.Name)
		}
	}
	slices.Sort(v.machines)
	return v, nil
}

// machines returns KCP's control-plane Machines.
func (o *observer) machines(ctx context.Context, g Gomega) []*clusterv1.Machine {
	ms, err := o.listMachines(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	return ms
}

func (o *observer) listMachines(ctx context.Context) ([]*clusterv1.Machine, error) {
	list := &clusterv1.MachineList{}
	err := o.e.Management.Client.List(ctx, list, client.InNamespace(o.e.Cluster.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: o.e.Cluster.Name})
	if err != nil {
		return nil, err
	}
	return collections.FromMachineList(list).Filter(collections.ControlPlaneMachines(o.e.Cluster.Name)).SortedByCreationTimestamp(), nil
}

// machineNames returns the names of KCP's Machines, sorted.
func (o *observer) machineNames(ctx context.Context, g Gomega) []string {
	var names []string
	for _, m := range o.machines(ctx, g) {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// same reports whether two conditions agree in type, status and reason.
func same(a, b metav1.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason
}

// print writes every side of a view.
func (v view) print(step string) {
	fmt.Printf("[%s] KCP              %s=%s reason=%s %s\n", step, v.kcpCluster.Type, v.kcpCluster.Status, v.kcpCluster.Reason, oneLine(v.kcpCluster.Message))
	fmt.Printf("[%s] ControlPlaneEtcd %s=%s reason=%s %s\n", step, v.cpe.cluster.Type, v.cpe.cluster.Status, v.cpe.cluster.Reason, oneLine(v.cpe.cluster.Message))
	fmt.Printf("[%s]   ControlPlaneEtcd members: %s\n", step, v.cpe.describe())
	fmt.Printf("[%s] fresh Observe    %s=%s reason=%s %s\n", step, v.adapter.Cluster.Type, v.adapter.Cluster.Status, v.adapter.Cluster.Reason, oneLine(v.adapter.Cluster.Message))
	for name, k := range v.kcpMachines {
		a := v.adapter.Machines[name]
		fmt.Printf("[%s]   Machine %s: KCP %s=%s/%s, fresh Observe %s=%s/%s\n", step, name, k.Type, k.Status, k.Reason, a.Type, a.Status, a.Reason)
	}
	fmt.Printf("[%s]   etcd members seen by etcd-adapter: %v (observe error: %v)\n", step, v.members, v.observeErr)
}

// evidence is what etcd-adapter's verdict rests on: each member's role and health as etcd
// itself reported them, and which Machines are deleting.
func (v view) evidence() string {
	out := ""
	for _, mh := range v.adapter.Members {
		role := "voter"
		if mh.Member.IsLearner {
			role = "learner"
		}
		out += fmt.Sprintf("%s(%s %s%s) ", mh.Member.Name, role, mh.Health, msgSuffix(mh.Message))
	}
	return fmt.Sprintf("members: %sdeleting Machines: %v", out, v.deleting)
}

func msgSuffix(m string) string {
	if m == "" {
		return ""
	}
	return ": " + oneLine(m)
}
