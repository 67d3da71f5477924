package adopter_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/docs/examples/adopter"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

var k3sControlPlane = hook.ControlPlane{Kind: "KThreesControlPlane", EmbeddedRemovalHook: adopter.ProviderHook.Key}

// The provider scales a healthy 3-member control plane down by one: the gate allows deleting
// the Machine that hosts the leader; after Cluster API drained it, the hook flow moves
// leadership off, removes the member, and (the member gone) releases the provider's hook.
func Example() {
	ctx := context.Background()
	snapshot, machines := threeMembers()
	etcdCluster := &fake.Cluster{ObserveResponse: snapshot, ApplyChanges: true, // adopter.EtcdFor(...) in a provider
		MoveLeaderResponse: etcd.LeaderMove{Outcome: etcd.LeaderMoved}}
	controlPlane := &clusterv1.Cluster{} // the provider's control-plane object
	k := newClient(machines)
	for _, m := range machines {
		if _, err := adopter.PlaceHook(ctx, k, m); err != nil {
			fmt.Println("error:", err)
			return
		}
	}

	victim := machines[0] // hosts the leader
	d := adopter.ScaleDown(ctx, etcdCluster, controlPlane, machines, victim, now)
	fmt.Println("delete:", d.Delete)
	c := v1beta1conditions.Get(controlPlane, "EtcdClusterHealthyCondition")
	fmt.Println("EtcdClusterHealthyCondition:", c.Status)

	drained(ctx, k, victim) // Cluster API deletes, drains, then waits on the hooks
	for range 5 {
		o, err := adopter.RemoveMemberAfterDrain(ctx, etcdCluster, k, k3sControlPlane, false, machines, get(ctx, k, victim), now)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(o.Phase)
		if o.Done() {
			break
		}
	}
	_, held := get(ctx, k, victim).Annotations[adopter.ProviderHook.Key]
	fmt.Println("hook held:", held)
	// Output:
	// delete: true
	// EtcdClusterHealthyCondition: True
	// LeaderMoved
	// Removing
	// Released
	// hook held: false
}

// etcd rejects the removal: the hook stays and the provider's condition says why until a person
// fixes the cause and asks for a retry; the new attempt then removes the member.
func Example_rejected() {
	ctx := context.Background()
	snapshot, machines := threeMembers()
	etcdCluster := &fake.Cluster{ObserveResponse: snapshot, ApplyChanges: true,
		RemoveMemberResponses: map[uint64]etcd.Removal{2: {State: etcd.RemovalRejected, Reason: "etcdserver: unhealthy cluster"}}}
	k := newClient(machines)
	victim := machines[1]
	_, _ = adopter.PlaceHook(ctx, k, victim)
	drained(ctx, k, victim)

	step := func() hook.Outcome {
		o, err := adopter.RemoveMemberAfterDrain(ctx, etcdCluster, k, k3sControlPlane, false, machines, get(ctx, k, victim), now)
		if err != nil {
			fmt.Println("error:", err)
		}
		return o
	}
	o := step()
	c := adopter.RemovalCondition(o)
	fmt.Println(c.Reason+":", o.Message[:strings.Index(o.Message, ".")])
	fmt.Println("asked again:", step().Phase, len(etcdCluster.RemovedMembers))

	// A person fixes etcd and asks for a retry.
	delete(etcdCluster.RemoveMemberResponses, 2)
	m := get(ctx, k, victim)
	before := m.DeepCopy()
	m.Annotations[hook.RetryRemovalAnnotation] = hook.AnnotationTrue
	_ = k.Patch(ctx, m, client.MergeFrom(before))
	for range 3 {
		o = step()
		fmt.Println(o.Phase)
		if o.Done() {
			break
		}
	}
	// Output:
	// Rejected: Removal of the etcd member of Machine m-cp-1 was rejected: etcdserver: unhealthy cluster
	// asked again: Rejected 1
	// Retried
	// Removing
	// Released
}

func threeMembers() (*etcd.Snapshot, []*clusterv1.Machine) {
	s := &etcd.Snapshot{Backend: "example", ObservedAt: now, LeaderID: 1}
	var machines []*clusterv1.Machine
	for i := range 3 {
		node := fmt.Sprintf("cp-%d", i)
		s.Members = append(s.Members, etcd.Member{ID: uint64(i + 1), Name: node, NodeName: node})
		machines = append(machines, &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "m-" + node},
			Status:     clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: node}},
		})
	}
	for _, m := range s.Members {
		s.Evidence = append(s.Evidence, etcd.MemberEvidence{MemberID: m.ID, NodeName: m.NodeName, Contact: etcd.ContactAnswered,
			ObservedAt: now, ClusterID: 0xc1, Members: s.Members, LeaderID: s.LeaderID})
	}
	return s, machines
}

// newClient stands in for the provider's management-cluster client.
func newClient(machines []*clusterv1.Machine) client.Client {
	scheme := runtime.NewScheme()
	_ = clusterv1.AddToScheme(scheme)
	objs := make([]client.Object, 0, len(machines))
	for _, m := range machines {
		objs = append(objs, m.DeepCopy())
	}
	return crfake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&clusterv1.Machine{}).Build()
}

// drained plays Cluster API's Machine controller: the Machine is deleted, and once drained its
// Deleting condition says it waits for pre-terminate hooks (cluster-api v1.14.2
// core/reconcilers/machine/machine_controller.go reconcileDelete).
func drained(ctx context.Context, k client.Client, m *clusterv1.Machine) {
	got := get(ctx, k, m)
	before := got.DeepCopy()
	got.Finalizers = []string{clusterv1.MachineFinalizer}
	_ = k.Patch(ctx, got, client.MergeFrom(before))
	_ = k.Delete(ctx, got)
	got = get(ctx, k, m)
	conditions.Set(got, metav1.Condition{Type: clusterv1.MachineDeletingCondition, Status: metav1.ConditionTrue, Reason: clusterv1.MachineDeletingWaitingForPreTerminateHookReason})
	_ = k.Status().Update(ctx, got)
}

func get(ctx context.Context, k client.Client, m *clusterv1.Machine) *clusterv1.Machine {
	got := &clusterv1.Machine{}
	_ = k.Get(ctx, client.ObjectKeyFromObject(m), got)
	return got
}
