package demo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// memberFails kills the etcd member of the first kubeadm Node and waits for the status to say so.
func (d *demo) memberFails(ctx context.Context) error {
	node := d.p.kubeadm.Nodes[0]
	d.title(fmt.Sprintf("The etcd member on kubeadm Node %s fails", node))
	if err := d.p.kubeadm.Etcd.MemberOnNode(node).Kill(); err != nil {
		return fmt.Errorf("failed to kill the etcd member of Node %s: %w", node, err)
	}
	d.say("Killed etcd on %s. Within one observation interval (%s here, 30s by default) the status says so:", node, observationInterval)
	var failed v1alpha1.EtcdMemberStatus
	err := waitFor(ctx, statusTimeout, "the kubeadm status to report the member of "+node+" not healthy", func(ctx context.Context) (bool, error) {
		cpe, err := d.cpe(ctx, "kubeadm")
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(cpe.Status.Members, func(m v1alpha1.EtcdMemberStatus) bool { return m.NodeName == node })
		if i < 0 || cpe.Status.Members[i].Health == v1alpha1.MemberHealthy || !conditions.IsTrue(cpe, v1alpha1.DegradedCondition) {
			return false, nil
		}
		// Note: cp-0 may have led; until the others elect a leader (one election timeout) they
		// answer "no leader" and are not healthy either. The story shows the settled state.
		for j, m := range cpe.Status.Members {
			if j != i && m.Health != v1alpha1.MemberHealthy {
				return false, nil
			}
		}
		failed = cpe.Status.Members[i]
		return true, nil
	})
	if err != nil {
		return err
	}
	d.story.FailedMember = failed
	d.say("  member %s on %s: %s (%s) %s\n", failed.Name, failed.NodeName, failed.Health, failed.Reason, failed.Message)
	return d.table(ctx)
}

// unsafeDeletionRefused deletes a second kubeadm Machine while one member is down: removing its
// member would leave one healthy voter of two, so the quorum guard refuses.
func (d *demo) unsafeDeletionRefused(ctx context.Context) error {
	m := d.p.machines["kubeadm"][d.p.kubeadm.Nodes[1]]
	d.title(fmt.Sprintf("Deleting a second kubeadm Machine (%s) is refused", m.Name))
	d.say("$ kubectl delete machine -n %s %s", namespace, m.Name)
	err := d.p.mgmt.Client.Delete(ctx, m.DeepCopy())
	switch {
	case err == nil:
		d.story.Refusal = ""
		return fmt.Errorf("the quorum guard let Machine %s be deleted while etcd had one member down", m.Name)
	case !apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "denied the request"):
		return fmt.Errorf("failed to delete Machine %s for another reason than the quorum guard: %w", m.Name, err)
	}
	d.story.Refusal = err.Error()
	d.say("Error from server: %s\n", err.Error())
	return d.table(ctx)
}

// memberRecovers restarts the killed member and waits for three healthy members again.
func (d *demo) memberRecovers(ctx context.Context) error {
	node := d.p.kubeadm.Nodes[0]
	d.title(fmt.Sprintf("The etcd member on %s comes back", node))
	if err := d.p.kubeadm.Etcd.MemberOnNode(node).Restart(ctx); err != nil {
		return fmt.Errorf("failed to restart the etcd member of Node %s: %w", node, err)
	}
	err := waitFor(ctx, statusTimeout, "the kubeadm status to report 3 healthy members", func(ctx context.Context) (bool, error) {
		cpe, err := d.cpe(ctx, "kubeadm")
		if err != nil {
			return false, err
		}
		return ptrIs(cpe.Status.HealthyVoters, 3) && conditions.IsFalse(cpe, v1alpha1.DegradedCondition), nil
	})
	if err != nil {
		return err
	}
	return d.table(ctx)
}

// machineDeleted deletes a K3s control-plane Machine that runs a Pod, and narrates what happens:
// Cluster API drains the Node (the Pod is evicted), the Machine waits on etcd-adapter's
// pre-terminate hook, etcd-adapter asks K3s to remove the member and waits until it is gone, then
// releases the hook, and Cluster API deletes the Machine.
func (d *demo) machineDeleted(ctx context.Context) error {
	node := d.p.k3s.Nodes[2]
	m := d.p.machines["k3s"][node]
	d.title(fmt.Sprintf("Deleting K3s Machine %s: drain, then member removal, then hook release", m.Name))
	wl := d.p.k3s.APIServer.Client
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "app-on-" + node},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app"}}},
	}
	if err := wl.Create(ctx, pod); err != nil {
		return fmt.Errorf("failed to create Pod %s on Node %s: %w", pod.Name, node, err)
	}
	member := d.p.k3s.Etcd.MemberOnNode(node)
	memberID := member.ID()
	d.say("Node %s runs Pod %s/%s and hosts etcd member %s (%x).", node, pod.Namespace, pod.Name, member.Name(), memberID)
	d.say("$ kubectl delete machine -n %s %s --wait=false\n", namespace, m.Name)

	w := &deletionWatch{d: d, machine: client.ObjectKeyFromObject(m), pod: client.ObjectKeyFromObject(pod), memberID: memberID, start: time.Now()}
	if err := d.p.mgmt.Client.Delete(ctx, m.DeepCopy()); err != nil {
		return fmt.Errorf("failed to delete Machine %s: %w", m.Name, err)
	}
	if err := waitFor(ctx, deletionTimeout, "Machine "+m.Name+" to be deleted", w.poll); err != nil {
		return err
	}
	d.story.Deletion = w.seen
	cpe, err := d.cpe(ctx, "k3s")
	if err != nil {
		return err
	}
	d.story.Removal = cpe.Status.Removal
	if r := cpe.Status.Removal; r != nil {
		d.say("\nstatus.removal: member %s of Machine %s: %s (%s)", r.Member, r.MachineName, r.Result, r.Message)
	}
	if err := d.machineEvents(ctx, m.Name); err != nil {
		return err
	}
	err = waitFor(ctx, statusTimeout, "the K3s status to report 2 members", func(ctx context.Context) (bool, error) {
		cpe, err := d.cpe(ctx, "k3s")
		if err != nil {
			return false, err
		}
		return ptrIs(cpe.Status.MemberCount, 2), nil
	})
	if err != nil {
		return err
	}
	return d.table(ctx)
}

// machineEvents prints the Events etcd-adapter recorded on the Machine, once the last of them
// (HookReleased) is written.
//
// Note: client-go's event recorder writes Events asynchronously, after the change they tell
// about, so the Machine can be gone before its HookReleased Event is written. It writes them in
// the order they were recorded: once HookReleased is there, every earlier Event is too.
func (d *demo) machineEvents(ctx context.Context, machine string) error {
	var mine []corev1.Event
	err := waitFor(ctx, statusTimeout, "the HookReleased Event of Machine "+machine, func(ctx context.Context) (bool, error) {
		events := &corev1.EventList{}
		if err := d.p.mgmt.Client.List(ctx, events, client.InNamespace(namespace)); err != nil {
			return false, fmt.Errorf("failed to list Events: %w", err)
		}
		mine = mine[:0]
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "Machine" && e.InvolvedObject.Name == machine && strings.Contains(e.Source.Component+e.ReportingController, "controlplaneetcd") {
				mine = append(mine, e)
			}
		}
		return slices.ContainsFunc(mine, func(e corev1.Event) bool { return e.Reason == v1alpha1.EventHookReleased }), nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(mine, func(a, b corev1.Event) int { return a.FirstTimestamp.Compare(b.FirstTimestamp.Time) })
	if len(mine) > 0 {
		d.say("\nEvents etcd-adapter recorded on Machine %s:", machine)
	}
	for _, e := range mine {
		d.say("  %-8s %-22s %s", e.Type, e.Reason, e.Message)
		d.story.Events = append(d.story.Events, e.Message)
	}
	return nil
}

// deletionWatch records the milestones of a Machine deletion as it polls.
type deletionWatch struct {
	d        *demo
	machine  client.ObjectKey
	pod      client.ObjectKey
	memberID uint64
	start    time.Time
	seen     []Milestone
}

func (w *deletionWatch) mark(what, detail string) {
	if slices.ContainsFunc(w.seen, func(m Milestone) bool { return m.What == what }) {
		return
	}
	ms := Milestone{What: what, At: time.Since(w.start), Detail: detail}
	w.seen = append(w.seen, ms)
	w.d.say("  +%5.1fs  %-45s %s", ms.At.Seconds(), what, detail)
}

// poll looks at the Machine, the Pod and etcd's member list once; it is done when the Machine is
// gone.
func (w *deletionWatch) poll(ctx context.Context) (bool, error) {
	m := &clusterv1.Machine{}
	err := w.d.p.mgmt.Client.Get(ctx, w.machine, m)
	gone := apierrors.IsNotFound(err)
	if err != nil && !gone {
		return false, err
	}
	if !gone {
		if c := conditions.Get(m, clusterv1.MachineDeletingCondition); c != nil {
			switch c.Reason {
			case clusterv1.MachineDeletingDrainingNodeReason:
				w.mark(MilestoneDraining, firstLine(c.Message))
			case clusterv1.MachineDeletingWaitingForPreTerminateHookReason:
				w.mark(MilestoneWaitingForHook, firstLine(c.Message))
			}
		}
	}
	if err := w.d.p.k3s.APIServer.Client.Get(ctx, w.pod, &corev1.Pod{}); apierrors.IsNotFound(err) {
		w.mark(MilestonePodEvicted, "Pod "+w.pod.String()+" is gone")
	}
	if removed, err := w.memberRemoved(ctx); err == nil && removed {
		w.mark(MilestoneMemberRemoved, fmt.Sprintf("etcd's member list no longer has %x", w.memberID))
	}
	if gone || m.Annotations[v1alpha1.PreTerminateHookAnnotation] == "" {
		w.mark(MilestoneHookReleased, v1alpha1.PreTerminateHookAnnotation+" removed")
	}
	if gone {
		w.mark(MilestoneMachineGone, "Cluster API deleted the infrastructure Machine and the Node")
	}
	return gone, nil
}

// memberRemoved asks etcd itself (the ground truth, not the status) whether the member is gone.
func (w *deletionWatch) memberRemoved(ctx context.Context) (bool, error) {
	cli, err := w.d.p.k3s.Etcd.NewClient(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return false, err
	}
	return !slices.ContainsFunc(resp.Members, func(m *etcdMember) bool { return m.ID == w.memberID }), nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// etcdMember is etcd's member type as MemberList returns it.
type etcdMember = etcdserverpb.Member
