package controlplaneetcd

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/pkg/capimachine"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

// scope is what one pass knows: gathered at its start, added to by the phases, and turned into
// the status at its end.
type scope struct {
	cpe      *v1alpha1.ControlPlaneEtcd
	cluster  *clusterv1.Cluster
	machines []*clusterv1.Machine
	now      time.Time
	// etcdMachines are the etcd Machines of the EtcdadmCluster the Cluster owns (external backend
	// only): the Machines its members run on, which are not control-plane Machines.
	etcdMachines []*clusterv1.Machine
	// etcdadm is true when the Cluster's external etcd is the EtcdadmCluster it owns: its members
	// run on the etcd Machines, whose deletions mode Manage holds with the hook.
	etcdadm bool

	// controlPlaneDeleting is true when the Cluster or its control-plane object is being deleted.
	controlPlaneDeleting bool
	// legacyHookAdoptable is true when no KThreesControlPlane is left to release the legacy hook.
	legacyHookAdoptable bool
	// controlPlaneFacts decide whether a provider's own hook goes before or after ours.
	controlPlaneFacts controlPlaneFacts
	// embeddedRemoval is true when the control-plane object carries hook.EmbeddedRemovalAnnotation:
	// its provider removes members itself, so this controller only observes the Cluster.
	embeddedRemoval bool
	// embeddedRemovalErr says what is wrong with that annotation's value, if anything.
	embeddedRemovalErr error
	// controlPlaneName names the control-plane object, for messages.
	controlPlaneName string

	backend    etcd.Cluster
	snapshot   *etcd.Snapshot
	observeErr error
	// clusterID is the cluster ID check of this pass's observation (checkClusterID): whether
	// the etcd that answered is the one status.clusterID recorded.
	clusterID clusterIDVerdict

	// progressing is set by a phase that has a membership change under way or blocked.
	progressing *metav1.Condition
	// requeueAfter is the shortest wait a phase asked for; zero means the observation interval.
	requeueAfter time.Duration
	// observationInterval is the ControlPlaneEtcd's, or the manager's default.
	observationInterval time.Duration

	// storedRemoval is status.removal as last written (read at the start of the pass, then
	// each write-ahead), so the removal flow writes its record only when it changed.
	storedRemoval *v1alpha1.MemberRemovalStatus
}

func (r *Reconciler) newScope(ctx context.Context, cpe *v1alpha1.ControlPlaneEtcd, cluster *clusterv1.Cluster) (*scope, error) {
	s := &scope{cpe: cpe, cluster: cluster, now: r.now(), observationInterval: cpe.Spec.ObservationIntervalOr(r.ObservationInterval),
		storedRemoval: cpe.Status.Removal.DeepCopy()}
	held, err := backends.ListControlPlaneAndEtcdMachines(ctx, r.Client, cluster.Namespace, cluster.Name)
	if err != nil {
		return nil, err
	}
	for _, m := range held {
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp {
			s.machines = append(s.machines, m)
		}
	}
	if cpe.Spec.Backend == v1alpha1.BackendExternal {
		ec := r.etcdadmCluster(ctx, cluster)
		s.etcdMachines = etcdMachinesOf(ec, held)
		s.etcdadm = ec != nil
		// Note: the etcdadm controller deletes every etcd Machine of an EtcdadmCluster being
		// deleted (controllers/controller.go reconcileDelete); no member is removed one by one then.
		s.controlPlaneDeleting = ec != nil && !ec.GetDeletionTimestamp().IsZero()
	}
	cp, err := r.controlPlane(ctx, cluster)
	if err != nil {
		return nil, err
	}
	s.controlPlaneDeleting = s.controlPlaneDeleting || !cluster.DeletionTimestamp.IsZero() || (cp != nil && !cp.DeletionTimestamp.IsZero())
	s.legacyHookAdoptable = cluster.Spec.ControlPlaneRef.Kind != kthreesControlPlaneKind || cp == nil
	s.controlPlaneFacts = r.controlPlaneFactsFor(ctx, cluster, s.machines)
	if cp != nil {
		s.controlPlaneName = fmt.Sprintf("%s %s", cluster.Spec.ControlPlaneRef.Kind, cp.Name)
		s.controlPlaneFacts.EmbeddedRemovalHook, s.embeddedRemoval, s.embeddedRemovalErr = hook.EmbeddedRemovalHookOf(cp.Annotations)
	}
	return s, nil
}

// etcdadmCluster returns the EtcdadmCluster the Cluster owns; nil when it owns none, or when
// which one is not clear (the backend then reports why it cannot observe).
func (r *Reconciler) etcdadmCluster(ctx context.Context, cluster *clusterv1.Cluster) *unstructured.Unstructured {
	ec, err := backends.FindEtcdadmCluster(ctx, r.Client, r.Client.RESTMapper(), cluster)
	if err != nil {
		// Note: the same lookup fails the backend's observation with the reason.
		return nil
	}
	return ec
}

// etcdMachinesOf returns the etcd Machines of ec among held (sorted by name): those labelled
// cluster.x-k8s.io/etcd-cluster=<EtcdadmCluster name>, the selector the etcdadm controller lists
// its own by (aws/etcdadm-controller controllers/helpers.go EtcdMachinesSelectorForCluster).
func etcdMachinesOf(ec *unstructured.Unstructured, held []*clusterv1.Machine) []*clusterv1.Machine {
	if ec == nil {
		return nil
	}
	var out []*clusterv1.Machine
	for _, m := range held {
		if m.Labels[backends.EtcdClusterLabel] == ec.GetName() {
			out = append(out, m)
		}
	}
	return out
}

// machineOfMember returns the Machine the member runs on: its etcd Machine (by peer URL host
// among the Machine's addresses, or by name, etcd.MembersOfMachine) when the Cluster's etcd is
// an EtcdadmCluster's, else the control-plane Machine on its Node.
func (s *scope) machineOfMember(m etcd.Member) *clusterv1.Machine {
	if len(s.etcdMachines) == 0 {
		return s.machineOnNode(m.NodeName)
	}
	facts := make([]etcd.Machine, 0, len(s.etcdMachines))
	for _, em := range s.etcdMachines {
		facts = append(facts, capimachine.Facts(em))
	}
	var found *clusterv1.Machine
	for i, em := range s.etcdMachines {
		if slices.ContainsFunc(etcd.MembersOfMachine([]etcd.Member{m}, facts, facts[i]), func(o etcd.Member) bool { return o.ID == m.ID }) {
			if found != nil {
				// Note: two Machines claim the member (a reused address); it is bound to neither.
				return nil
			}
			found = em
		}
	}
	return found
}

// kthreesControlPlaneKind is cluster-api-k3s's control-plane kind.
const kthreesControlPlaneKind = "KThreesControlPlane"

// controlPlane reads the metadata of the Cluster's control-plane object; nil when the Cluster
// has none, or its kind is not one the manager reads (backends.ControlPlaneKinds) or is not
// installed, or it is gone.
func (r *Reconciler) controlPlane(ctx context.Context, cluster *clusterv1.Cluster) (*metav1.PartialObjectMetadata, error) {
	obj := &metav1.PartialObjectMetadata{}
	found, err := backends.GetControlPlane(ctx, r.Client, r.Client.RESTMapper(), cluster, obj)
	if err != nil || !found {
		return nil, err
	}
	return obj, nil
}

// manages reports whether this pass acts on membership: mode Manage, on a Cluster whose
// control-plane provider does not remove members itself (hook.EmbeddedRemovalAnnotation: two
// removers would race, and its hook would wait for ours while ours waited for it), with a
// backend whose members run on Machines of the Cluster (the control-plane Machines, or the etcd Machines of the
// EtcdadmCluster the Cluster owns). Manage on any other external etcd (a KubeadmControlPlane's
// etcd.external) is observed only, and Progressing says so: no Machine deletion of the Cluster
// removes a member there, so a hook would wait for nothing. The CRD cannot tell the two external
// etcds apart (that depends on the objects the Cluster owns), so this is where the refusal is.
func (s *scope) manages() bool {
	if s.cpe.Spec.Mode != v1alpha1.ModeManage {
		return false
	}
	if s.embeddedRemoval {
		s.progressing = &metav1.Condition{Type: v1alpha1.ProgressingCondition, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ProgressingProviderRemovesMembersReason, Message: s.embeddedRemovalMessage()}
		return false
	}
	if !s.cpe.Spec.Backend.HostsMembersOnControlPlaneMachines() && !s.etcdadm {
		s.progressing = &metav1.Condition{Type: v1alpha1.ProgressingCondition, Status: metav1.ConditionFalse,
			Reason:  v1alpha1.ProgressingModeNotSupportedReason,
			Message: fmt.Sprintf("Mode %s is not supported for backend %s without an EtcdadmCluster: its members run on no Machine of the Cluster; etcd is only observed", v1alpha1.ModeManage, s.cpe.Spec.Backend)}
		return false
	}
	return true
}

// embeddedRemovalMessage says why mode Manage is not applied to a Cluster whose provider removes
// members itself.
func (s *scope) embeddedRemovalMessage() string {
	msg := fmt.Sprintf("%s has annotation %s: its provider removes etcd members itself, so etcd-adapter observes the Cluster only (mode %s is not applied)",
		s.controlPlaneName, hook.EmbeddedRemovalAnnotation, v1alpha1.ModeManage)
	if s.embeddedRemovalErr != nil {
		msg += "; " + s.embeddedRemovalErr.Error()
	}
	return msg
}

// memberMachines are the Machines whose deletion takes an etcd member with it, which mode Manage
// holds with the hook: the etcd Machines of an EtcdadmCluster's etcd, else the control-plane
// Machines.
func (s *scope) memberMachines() []*clusterv1.Machine {
	if s.etcdadm {
		return s.etcdMachines
	}
	return s.machines
}

// healthInput is what the health verdicts of this pass are computed from. The members of an
// external etcd run on no control-plane Machine, so the Machines are left out and no member is a
// ghost for lacking one.
func (s *scope) healthInput() etcd.HealthInput {
	in := etcd.HealthInput{Snapshot: s.snapshot, ObserveErr: s.observeErr, Machines: s.machineFacts(), Now: s.now}
	if !s.cpe.Spec.Backend.HostsMembersOnControlPlaneMachines() {
		in.Machines, in.MembersOffMachines = nil, true
	}
	return in
}

// machineFacts are the decision inputs of every Machine that hosts members (memberMachines).
func (s *scope) machineFacts() []etcd.Machine {
	machines := s.memberMachines()
	out := make([]etcd.Machine, 0, len(machines))
	for _, m := range machines {
		out = append(out, capimachine.Facts(m))
	}
	return out
}

// machineOnNode returns the control-plane Machine whose Node is node; none for a backend whose
// members run on no control-plane Machine (an external member's NodeName is its own host name).
func (s *scope) machineOnNode(node string) *clusterv1.Machine {
	if !s.cpe.Spec.Backend.HostsMembersOnControlPlaneMachines() {
		return nil
	}
	for _, m := range s.machines {
		if node != "" && m.Status.NodeRef.Name == node {
			return m
		}
	}
	return nil
}

// setProgressing says a membership change is under way or waits, for a phase outside the removal
// flow of the deleting Machines (whose steps return their outcome instead).
func (s *scope) setProgressing(reason, msg string) {
	s.progressing = progressingTrue(reason, msg)
}

// wantRequeue records that a phase wants to be back within d.
func (s *scope) wantRequeue(d time.Duration) {
	if s.requeueAfter == 0 || d < s.requeueAfter {
		s.requeueAfter = d
	}
}

// requeue is the pass's result: the shortest wait asked for, at most the observation interval.
func (s *scope) requeue() ctrl.Result {
	d := s.observationInterval
	if d <= 0 {
		// A scope not built by newScope (unit tests) has no manager default.
		d = s.cpe.Spec.ObservationIntervalOrDefault()
	}
	if s.observeErr != nil {
		d = min(d, unreachableRetryInterval)
	}
	if s.requeueAfter > 0 {
		d = min(d, s.requeueAfter)
	}
	return ctrl.Result{RequeueAfter: d}
}
