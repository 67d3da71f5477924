package quorumguard

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	etcdfake "github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
)

// TestGuard_deletionsUnderWay: each deletion is projected together with the deletions already
// under way (Machines the apiserver shows deleting), removed before it in the order the deletion
// hook takes them (oldest deletion first).
func TestGuard_deletionsUnderWay(t *testing.T) {
	tests := []struct {
		name        string
		snapshot    *etcd.Snapshot
		deleting    []string
		target      string
		wantAllowed bool
		wantReason  string
		wantMessage string
	}{
		{name: "with two of three healthy Machines deleting, the third is the last member and is refused",
			snapshot: healthy(3), deleting: []string{"cp-0", "cp-1"}, target: "cp-2", wantReason: v1alpha1.EventDeletionRefusedLastMember,
			wantMessage: "deleting Machine m-cp-2 would remove the last etcd member of Cluster c (LastMember) with the deletions of Machines m-cp-0, m-cp-1 already under way: removing etcd members cp-0, cp-1, cp-2 would remove every member"},
		{name: "with one of three healthy Machines deleting, a second may go",
			snapshot: healthy(3), deleting: []string{"cp-0"}, target: "cp-1", wantAllowed: true},
		{name: "4 voters with one down and a healthy Machine deleting: a second healthy one is refused",
			snapshot: broken(healthy(4), 3), deleting: []string{"cp-0"}, target: "cp-1", wantReason: v1alpha1.EventDeletionRefused,
			wantMessage: "deleting Machine m-cp-1 would lose etcd quorum of Cluster c (WouldLoseQuorum) with the deletions of Machines m-cp-0 already under way: once etcd member cp-0 is removed, removing etcd member cp-1 would lose quorum: after it 1 of 2 voters are healthy"},
		{name: "4 voters with one down and a healthy Machine deleting: the down one may go",
			snapshot: broken(healthy(4), 3), deleting: []string{"cp-0"}, target: "cp-3", wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := &recorder{}
			guard := newGuard(&etcdfake.Cluster{ObserveResponse: tt.snapshot}, rec)
			var objs []client.Object
			for i := range tt.snapshot.Members {
				node := fmt.Sprintf("cp-%d", i)
				m := machine("m-"+node, node, false)
				for j, d := range tt.deleting {
					if d == node {
						m.Finalizers = []string{"test"}
						m.DeletionTimestamp = &metav1.Time{Time: time.Now().Add(time.Duration(j-10) * time.Second)}
					}
				}
				objs = append(objs, m)
			}
			guard.APIReader = clientWith(objs...)
			guard.Writer = guard.APIReader.(client.Client)

			resp := guard.Handle(context.Background(), deleteRequest(g, machine("m-"+tt.target, tt.target, false), false))

			g.Expect(resp.Allowed).To(Equal(tt.wantAllowed), "%+v", resp.Result)
			if !tt.wantAllowed {
				g.Expect(resp.Result.Message).To(ContainSubstring(tt.wantMessage))
				g.Expect(rec.events).To(ContainElement(HaveField("Reason", tt.wantReason)))
			}
		})
	}
}

// TestGuard_concurrentDeletes: DELETEs racing on the same observation, before the apiserver wrote
// any of them, are decided one at a time and each counts the ones admitted before it: of three
// healthy members' Machines, two are admitted and the third is refused, naming the other two.
func TestGuard_concurrentDeletes(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	guard := newGuard(&etcdfake.Cluster{ObserveResponse: healthy(3)}, rec)
	var objs []client.Object
	for i := range 3 {
		objs = append(objs, machine(fmt.Sprintf("m-cp-%d", i), fmt.Sprintf("cp-%d", i), false))
	}
	guard.APIReader = clientWith(objs...)
	guard.Writer = guard.APIReader.(client.Client)

	var wg sync.WaitGroup
	resps := make([]bool, 3)
	msgs := make([]string, 3)
	for i := range 3 {
		wg.Go(func() {
			resp := guard.Handle(context.Background(), deleteRequest(g, machine(fmt.Sprintf("m-cp-%d", i), fmt.Sprintf("cp-%d", i), false), false))
			resps[i] = resp.Allowed
			if resp.Result != nil {
				msgs[i] = resp.Result.Message
			}
		})
	}
	wg.Wait()

	admitted := 0
	for i, ok := range resps {
		if ok {
			admitted++
			continue
		}
		g.Expect(msgs[i]).To(And(ContainSubstring("would remove the last etcd member of Cluster c"), ContainSubstring("already under way")))
	}
	g.Expect(admitted).To(Equal(2), "messages: %q", msgs)
}

// TestGuard_replicasShareTheRecord: two replicas of the guard, each answering some of the DELETEs
// racing on the same observation before the apiserver wrote any of them, count each other's
// admissions through the record on the apiserver: of three healthy members' Machines two are
// admitted, never three, however the requests are spread.
func TestGuard_replicasShareTheRecord(t *testing.T) {
	for round := range 5 {
		g := NewWithT(t)
		var objs []client.Object
		for i := range 3 {
			objs = append(objs, machine(fmt.Sprintf("m-cp-%d", i), fmt.Sprintf("cp-%d", i), false))
		}
		c := clientWith(objs...)
		replicas := []*Guard{newGuard(&etcdfake.Cluster{ObserveResponse: healthy(3)}, &recorder{}), newGuard(&etcdfake.Cluster{ObserveResponse: healthy(3)}, &recorder{})}
		for _, r := range replicas {
			r.APIReader, r.Writer = c, c
		}
		var wg sync.WaitGroup
		allowed := make([]bool, 3)
		for i := range 3 {
			wg.Go(func() {
				m := machine(fmt.Sprintf("m-cp-%d", i), fmt.Sprintf("cp-%d", i), false)
				allowed[i] = replicas[(i+round)%2].Handle(context.Background(), deleteRequest(g, m, false)).Allowed
			})
		}
		wg.Wait()
		g.Expect(slices.Index(allowed, false)).NotTo(Equal(-1), "round %d: all three admitted", round)
	}
}

// TestGuard_dryRunAdmitsNothing: a server-side dry run is answered but not remembered, so it does
// not count as a deletion under way.
func TestGuard_dryRunAdmitsNothing(t *testing.T) {
	g := NewWithT(t)
	guard := newGuard(&etcdfake.Cluster{ObserveResponse: healthy(3)}, &recorder{})
	var objs []client.Object
	for i := range 3 {
		objs = append(objs, machine(fmt.Sprintf("m-cp-%d", i), fmt.Sprintf("cp-%d", i), false))
	}
	guard.APIReader = clientWith(objs...)
	guard.Writer = guard.APIReader.(client.Client)
	for i := range 2 {
		g.Expect(guard.Handle(context.Background(), deleteRequest(g, machine(fmt.Sprintf("m-cp-%d", i), fmt.Sprintf("cp-%d", i), false), true)).Allowed).To(BeTrue())
	}
	g.Expect(guard.Handle(context.Background(), deleteRequest(g, machine("m-cp-2", "cp-2", false), false)).Allowed).To(BeTrue())
}

// TestGuard_letsThrough: deletions that do not remove an etcd member the guard must protect go
// through unchecked, even next to a broken member: clusterctl move of a paused Cluster, a paused
// Cluster (with a warning and a Warning Event, since a person bypassed the guard), a control plane
// being deleted. A skip annotation with any value but "true" does not skip, and delete-for-move
// on a Cluster that is not paused does not either.
func TestGuard_letsThrough(t *testing.T) {
	tests := []struct {
		name        string
		machine     func(*clusterv1.Machine)
		cluster     func(*clusterv1.Cluster)
		controlPlan *controlplanev1.KubeadmControlPlane
		wantAllowed bool
		// wantEvent is the Warning Event of a deletion let through as a bypass.
		wantEvent string
	}{
		{name: "clusterctl move's delete-for-move on a paused Cluster is let through, with an Event and no warning",
			machine: func(m *clusterv1.Machine) { m.Annotations = map[string]string{v1alpha1.DeleteForMoveAnnotation: ""} },
			cluster: func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) }, wantAllowed: true, wantEvent: v1alpha1.EventDeletionAllowedForMove},
		{name: "delete-for-move on a Cluster that is not paused is guarded",
			machine: func(m *clusterv1.Machine) { m.Annotations = map[string]string{v1alpha1.DeleteForMoveAnnotation: ""} }},
		{name: "a Cluster paused by spec.paused is let through, as a bypass",
			cluster: func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) }, wantAllowed: true, wantEvent: v1alpha1.EventDeletionAllowedClusterPaused},
		{name: "a Cluster paused by annotation is let through, as a bypass",
			cluster: func(c *clusterv1.Cluster) { c.Annotations = map[string]string{clusterv1.PausedAnnotation: ""} }, wantAllowed: true,
			wantEvent: v1alpha1.EventDeletionAllowedClusterPaused},
		{name: "a control plane being deleted is let through",
			cluster: func(c *clusterv1.Cluster) {
				c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "c"}
			},
			controlPlan: &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Finalizers: []string{"test"},
				DeletionTimestamp: &metav1.Time{Time: time.Now()}}}, wantAllowed: true},
		{name: "a control plane that is not being deleted is guarded",
			cluster: func(c *clusterv1.Cluster) {
				c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "c"}
			},
			controlPlan: &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}},
		{name: "skip-quorum-guard=false does not skip",
			machine: func(m *clusterv1.Machine) {
				m.Annotations = map[string]string{v1alpha1.SkipQuorumGuardAnnotation: "false"}
			}},
		{name: "an empty skip-quorum-guard does not skip",
			machine: func(m *clusterv1.Machine) { m.Annotations = map[string]string{v1alpha1.SkipQuorumGuardAnnotation: ""} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := &recorder{}
			guard := newGuard(&etcdfake.Cluster{ObserveResponse: broken(healthy(3), 1)}, rec)
			c := cluster()
			if tt.cluster != nil {
				tt.cluster(c)
			}
			objs := []client.Object{c, &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
				Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c", Backend: v1alpha1.BackendKubeadm, Mode: v1alpha1.ModeManage}}}
			if tt.controlPlan != nil {
				objs = append(objs, tt.controlPlan)
			}
			guard.Client = clientWith(objs...)
			m := machine("m-cp-0", "cp-0", false)
			if tt.machine != nil {
				tt.machine(m)
			}

			resp := guard.Handle(context.Background(), deleteRequest(g, m, false))

			g.Expect(resp.Allowed).To(Equal(tt.wantAllowed), "%+v", resp.Result)
			switch {
			case tt.wantEvent == v1alpha1.EventDeletionAllowedForMove:
				g.Expect(resp.Warnings).To(BeEmpty())
				msg := fmt.Sprintf("annotation %s on Machine m-cp-0 of paused Cluster c: the etcd quorum guard does not check the deletion", v1alpha1.DeleteForMoveAnnotation)
				g.Expect(rec.events).To(ConsistOf(
					And(HaveField("Kind", "Machine"), HaveField("Name", "m-cp-0"), HaveField("Type", "Warning"), HaveField("Reason", tt.wantEvent), HaveField("Message", ContainSubstring(msg))),
					And(HaveField("Kind", v1alpha1.ControlPlaneEtcdKind), HaveField("Name", "c"), HaveField("Type", "Warning"), HaveField("Reason", tt.wantEvent), HaveField("Message", ContainSubstring(msg)))))
			case tt.wantEvent != "":
				g.Expect(resp.Warnings).To(ConsistOf(ContainSubstring("the etcd quorum guard does not check the deletion of Machine m-cp-0")))
				g.Expect(rec.events).To(ConsistOf(event{Kind: "Machine", Name: "m-cp-0", Type: "Warning", Reason: tt.wantEvent, Message: resp.Warnings[0]},
					event{Kind: v1alpha1.ControlPlaneEtcdKind, Name: "c", Type: "Warning", Reason: tt.wantEvent, Message: resp.Warnings[0]}))
			case tt.wantAllowed:
				g.Expect(resp.Warnings).To(BeEmpty())
				g.Expect(rec.events).To(BeEmpty())
			}
		})
	}
}

// TestAdmissionRecord_underWay: the deletions the guard recorded as admitted count until the apiserver shows them
// (then they count as Machines being deleted), the Machine is gone or replaced, or admittedTTL
// passed; the apiserver's deletions come first, oldest first.
func TestAdmissionRecord_underWay(t *testing.T) {
	now := time.Now()
	m := func(name, uid string, deletedAgo time.Duration) clusterv1.Machine {
		x := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
		if deletedAgo > 0 {
			x.DeletionTimestamp = &metav1.Time{Time: now.Add(-deletedAgo)}
		}
		return x
	}
	tests := []struct {
		name     string
		all      []clusterv1.Machine
		admitted []admittedDeletion
		want     []string
		kept     []string
	}{
		{name: "Machines being deleted count, oldest deletion first",
			all: []clusterv1.Machine{m("a", "1", time.Second), m("b", "2", time.Minute), m("self", "9", 0)}, want: []string{"b", "a"}},
		{name: "an admitted deletion not written yet counts after those written",
			all:      []clusterv1.Machine{m("a", "1", 0), m("b", "2", time.Second), m("self", "9", 0)},
			admitted: []admittedDeletion{{Name: "a", UID: "1", At: now}}, want: []string{"b", "a"}, kept: []string{"a"}},
		{name: "an admitted deletion the apiserver shows is forgotten",
			all:      []clusterv1.Machine{m("a", "1", time.Second), m("self", "9", 0)},
			admitted: []admittedDeletion{{Name: "a", UID: "1", At: now}}, want: []string{"a"}},
		{name: "an admitted deletion whose Machine is gone is forgotten",
			all:      []clusterv1.Machine{m("self", "9", 0)},
			admitted: []admittedDeletion{{Name: "a", UID: "1", At: now}}},
		{name: "an admitted deletion whose Machine was replaced under the same name is forgotten",
			all:      []clusterv1.Machine{m("a", "2", 0), m("self", "9", 0)},
			admitted: []admittedDeletion{{Name: "a", UID: "1", At: now}}},
		{name: "an admitted deletion never written within admittedTTL is forgotten",
			all:      []clusterv1.Machine{m("a", "1", 0), m("self", "9", 0)},
			admitted: []admittedDeletion{{Name: "a", UID: "1", At: now.Add(-admittedTTL - time.Second)}}},
		{name: "the Machine asked about is not under way itself",
			all:      []clusterv1.Machine{m("self", "9", 0)},
			admitted: []admittedDeletion{{Name: "self", UID: "9", At: now}}, kept: []string{"self"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := &admissionRecord{admitted: tt.admitted}
			self := m("self", "9", 0)
			var got []string
			for _, u := range rec.underWay(tt.all, &self, now) {
				got = append(got, u.Name)
			}
			g.Expect(got).To(Equal(tt.want))
			var kept []string
			for _, a := range rec.pending(tt.all, now) {
				kept = append(kept, a.Name)
			}
			g.Expect(kept).To(Equal(tt.kept))
		})
	}
}

// clientWith is a fake client holding the Cluster and ControlPlaneEtcd newGuard makes, with objs
// in place of any of them with the same name (objects being deleted need a finalizer).
func clientWith(objs ...client.Object) client.Client {
	base := []client.Object{cluster(), &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c", Backend: v1alpha1.BackendK3s, Mode: v1alpha1.ModeManage}}}
	for _, o := range objs {
		base = slices.DeleteFunc(base, func(b client.Object) bool {
			return fmt.Sprintf("%T", b) == fmt.Sprintf("%T", o) && b.GetName() == o.GetName()
		})
	}
	return fake.NewClientBuilder().WithScheme(testScheme()).WithIndex(&v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, creation.ClusterNameOf).WithObjects(append(base, objs...)...).Build()
}
