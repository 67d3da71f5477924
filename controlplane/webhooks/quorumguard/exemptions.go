package quorumguard

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

// deletion is a Machine deletion the guard checks, with what it is checked against.
type deletion struct {
	m       *clusterv1.Machine
	cluster *clusterv1.Cluster
	cpe     *v1alpha1.ControlPlaneEtcd
	// hosts select the Machines whose members this deletion is projected with: the Cluster's
	// control-plane Machines, or the etcd Machines of its EtcdadmCluster.
	hosts []client.ListOption
	// skip is true when the Machine has annotation skip-quorum-guard=true: the deletion goes
	// through unchecked, and is still recorded as admitted.
	skip bool
	// embeddedHook is the hook key in which the control-plane provider removes members itself
	// (hook.EmbeddedRemovalAnnotation on its control-plane object); "" when it names none.
	embeddedHook string
}

// toCheck returns the deletion of m to check (checked true), or the outcome that lets it
// through unchecked: a Machine that hosts no member of a Cluster's etcd, a Machine or Cluster
// already being deleted, a paused Cluster, a Cluster without a ControlPlaneEtcd or whose members
// run on no Machine of this kind, and a control plane (or EtcdadmCluster) being deleted.
func (g *Guard) toCheck(ctx context.Context, m *clusterv1.Machine) (deletion, outcome, bool) {
	_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
	etcdCluster, etcdMachine := m.Labels[backends.EtcdClusterLabel]
	if !cp && !etcdMachine {
		return deletion{}, allowed("neither a control-plane Machine nor an etcd Machine"), false
	}
	if !m.DeletionTimestamp.IsZero() {
		return deletion{}, allowed("the Machine is already being deleted"), false
	}
	cluster := &clusterv1.Cluster{}
	if err := g.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, cluster); err != nil {
		return deletion{}, allowed(fmt.Sprintf("failed to get Cluster %s: %v", m.Spec.ClusterName, err)), false
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return deletion{}, allowed("the Cluster is being deleted"), false
	}
	cpe, err := creation.ControlPlaneEtcdOf(ctx, g.Client, cluster)
	if annotations.IsPaused(cluster, cluster) {
		// Note: the ControlPlaneEtcd only carries the Event too; failing to read it lets nothing
		// less through.
		return deletion{}, pausedClusterDeletion(m, cluster, cpe), false
	}
	switch {
	case err != nil:
		return deletion{}, allowed(err.Error()), false
	case cpe == nil:
		return deletion{}, allowed("the Cluster has no ControlPlaneEtcd"), false
	case cp && !cpe.Spec.Backend.HostsMembersOnControlPlaneMachines():
		// Note: an external etcd's members run on no control-plane Machine (KubeadmControlPlane
		// with clusterConfiguration.etcd.external), so deleting one removes no member, whatever
		// etcd's health; its members are not matched to these Machines by name or address.
		return deletion{}, allowed(fmt.Sprintf("ControlPlaneEtcd %s has backend %s: its members run on no control-plane Machine, so deleting one removes no etcd member", cpe.Name, cpe.Spec.Backend)), false
	}
	d := deletion{m: m, cluster: cluster, cpe: cpe, skip: m.Annotations[v1alpha1.SkipQuorumGuardAnnotation] == v1alpha1.AnnotationTrue,
		hosts: []client.ListOption{client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}, client.HasLabels{clusterv1.MachineControlPlaneLabel}}}
	if !cp {
		if why, ok := g.etcdadmMachineChecked(ctx, cluster, cpe, etcdCluster); !ok {
			return deletion{}, allowed(why), false
		}
		d.hosts = []client.ListOption{client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name, backends.EtcdClusterLabel: etcdCluster}}
		return d, outcome{}, true
	}
	deleting, embeddedHook, err := g.controlPlaneFacts(ctx, cluster)
	d.embeddedHook = embeddedHook
	switch {
	case err != nil:
		return deletion{}, allowed(err.Error()), false
	case deleting:
		return deletion{}, allowed(fmt.Sprintf("the control plane %s %s is being deleted", cluster.Spec.ControlPlaneRef.Kind, cluster.Spec.ControlPlaneRef.Name)), false
	}
	return d, outcome{}, true
}

// pausedClusterDeletion lets a deletion of a paused Cluster's Machine through: while a Cluster is
// paused neither Cluster API nor etcd-adapter acts on its Machines, so nothing would remove the
// member anyway. clusterctl move pauses the Cluster before it deletes the source's objects, each
// with the delete-for-move annotation: the Machine moves, its etcd member stays. Any other
// deletion of a paused Cluster's Machine is a bypass of the guard, recorded as a Warning. Both
// are recorded as Warning Events naming the user who deleted: a person may set delete-for-move
// as well as clusterctl, and the guard cannot tell them apart; the move's gets no warning to the
// client, so that clusterctl move prints none per Machine.
//
// Important! delete-for-move counts only on a paused Cluster: anyone may set it on a Machine, and
// on a running Cluster it would switch the guard off for that deletion.
func pausedClusterDeletion(m *clusterv1.Machine, cluster *clusterv1.Cluster, cpe *v1alpha1.ControlPlaneEtcd) outcome {
	if _, move := m.Annotations[v1alpha1.DeleteForMoveAnnotation]; move {
		return allowedWithEvent(cpe, v1alpha1.EventDeletionAllowedForMove, fmt.Sprintf(
			"annotation %s on Machine %s of paused Cluster %s: the etcd quorum guard does not check the deletion, as clusterctl move deletes the Machine from the source management cluster and the etcd member stays",
			v1alpha1.DeleteForMoveAnnotation, m.Name, cluster.Name))
	}
	return allowedWithWarning(cpe, v1alpha1.EventDeletionAllowedClusterPaused, fmt.Sprintf(
		"Cluster %s is paused (spec.paused or annotation %s): the etcd quorum guard does not check the deletion of Machine %s, and its etcd member is not removed while the Cluster is paused",
		cluster.Name, clusterv1.PausedAnnotation, m.Name))
}

func skipped(m *clusterv1.Machine) string {
	return fmt.Sprintf("etcd quorum guard skipped for Machine %s by annotation %s=%s", m.Name, v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue)
}

// etcdadmMachineChecked reports whether the deletion of an etcd Machine of the EtcdadmCluster
// named etcdCluster is to be projected, and why not when it is not: only the etcd Machines of the
// EtcdadmCluster the Cluster owns host members of the Cluster's external etcd. While that
// EtcdadmCluster is being deleted, the etcdadm controller deletes every etcd Machine
// (controllers/controller.go reconcileDelete) and is let through, as a control plane being
// deleted is.
func (g *Guard) etcdadmMachineChecked(ctx context.Context, cluster *clusterv1.Cluster, cpe *v1alpha1.ControlPlaneEtcd, etcdCluster string) (string, bool) {
	if cpe.Spec.Backend != v1alpha1.BackendExternal {
		return fmt.Sprintf("an etcd Machine of EtcdadmCluster %s, and ControlPlaneEtcd %s has backend %s", etcdCluster, cpe.Name, cpe.Spec.Backend), false
	}
	ec, err := backends.FindEtcdadmCluster(ctx, g.Client, g.RESTMapper, cluster)
	switch {
	case err != nil:
		return err.Error(), false
	case ec == nil || ec.GetName() != etcdCluster:
		return fmt.Sprintf("an etcd Machine of EtcdadmCluster %s, which Cluster %s does not own", etcdCluster, cluster.Name), false
	case !ec.GetDeletionTimestamp().IsZero():
		return fmt.Sprintf("EtcdadmCluster %s is being deleted", etcdCluster), false
	}
	return "", true
}

// controlPlaneFacts reports whether the Cluster's control-plane object (spec.controlPlaneRef) is
// being deleted (a kind that is not installed, or an object that is gone, is not) and the hook in
// which its provider removes members itself (hook.EmbeddedRemovalAnnotation), "" when it names
// none. Only its metadata is read.
func (g *Guard) controlPlaneFacts(ctx context.Context, cluster *clusterv1.Cluster) (deleting bool, embeddedHook string, err error) {
	if g.RESTMapper == nil {
		return false, "", nil
	}
	obj := &metav1.PartialObjectMetadata{}
	found, err := backends.GetControlPlane(ctx, g.Client, g.RESTMapper, cluster, obj)
	if err != nil || !found {
		return false, "", err
	}
	embeddedHook, _, _ = hook.EmbeddedRemovalHookOf(obj.Annotations)
	return !obj.DeletionTimestamp.IsZero(), embeddedHook, nil
}
