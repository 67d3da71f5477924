package controlplaneetcd

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines/status,verbs=patch

// memberConditionUpdate is the EtcdAdapterMemberHealthy condition one Machine gets.
type memberConditionUpdate struct {
	machine   *clusterv1.Machine
	condition metav1.Condition
}

// setMachineMembers decides the EtcdAdapterMemberHealthy condition of every Machine that hosts a
// member and is not being deleted (a MachineHealthCheck ignores deleting Machines), and records
// the evidence in status.machineMembers. The conditions are written by writeMemberConditions once
// the status, with the evidence, is: a restart then never finds a False condition without the
// evidence behind it.
func setMachineMembers(s *scope) []memberConditionUpdate {
	observed := machineObservations(s)
	old := map[string]*v1alpha1.MachineMemberStatus{}
	for i := range s.cpe.Status.MachineMembers {
		old[s.cpe.Status.MachineMembers[i].MachineName] = &s.cpe.Status.MachineMembers[i]
	}
	var evidence []v1alpha1.MachineMemberStatus
	var out []memberConditionUpdate
	for _, m := range s.memberMachines() {
		o, ok := observed[m.Name]
		if !ok || !m.DeletionTimestamp.IsZero() {
			continue
		}
		c, ev := decideMemberCondition(memberConditionInput{
			machine: m.Name, observed: o, evidence: old[m.Name], current: conditions.Get(m, v1alpha1.MemberHealthyMachineCondition),
			now: s.now, unhealthyTimeout: s.cpe.Spec.MemberUnhealthyTimeoutOrDefault(), recoveryTime: s.cpe.Spec.MemberRecoveryTimeOrDefault(),
		})
		evidence = append(evidence, ev)
		out = append(out, memberConditionUpdate{machine: m, condition: c})
	}
	slices.SortFunc(evidence, func(a, b v1alpha1.MachineMemberStatus) int { return cmp.Compare(a.MachineName, b.MachineName) })
	s.cpe.Status.MachineMembers = evidence
	return out
}

// machineObservations is what the pass saw of the member of each Machine that hosts one: the
// Machine's EtcdMemberHealthy verdict (the reasons of status.members), or for the etcd Machines
// of an EtcdadmCluster, which the verdict leaves out, their members in status.members.
func machineObservations(s *scope) map[string]memberObservation {
	verdict := etcd.AssessHealth(s.healthInput())
	out := map[string]memberObservation{}
	if s.cpe.Spec.Backend.HostsMembersOnControlPlaneMachines() {
		for name, c := range verdict.Machines {
			out[name] = observationFrom(c)
		}
		return out
	}
	for _, m := range s.etcdMachines {
		out[m.Name] = etcdMachineObservation(s, verdict, m)
	}
	return out
}

func etcdMachineObservation(s *scope, verdict etcd.HealthVerdict, m *clusterv1.Machine) memberObservation {
	if s.snapshot == nil {
		return memberObservation{health: etcd.Unknown, reason: verdict.Cluster.Reason, message: verdict.Cluster.Message}
	}
	if len(m.Status.Addresses) == 0 {
		return memberObservation{health: etcd.Unknown, reason: v1alpha1.EtcdMemberInspectionFailedReason,
			message: "Waiting for the Machine to report its addresses"}
	}
	var on []v1alpha1.EtcdMemberStatus
	for _, ms := range s.cpe.Status.Members {
		if ms.MachineName == m.Name {
			on = append(on, ms)
		}
	}
	switch {
	case len(on) == 0:
		return memberObservation{health: etcd.Unhealthy, reason: v1alpha1.EtcdMemberNotHealthyReason,
			message: fmt.Sprintf("No etcd member runs on Machine %s", m.Name)}
	case len(on) > 1:
		return memberObservation{health: etcd.Unhealthy, reason: v1alpha1.EtcdMemberNotHealthyReason,
			message: fmt.Sprintf("%d etcd members run on Machine %s", len(on), m.Name)}
	case on[0].Health == v1alpha1.MemberHealthy && on[0].Role == v1alpha1.MemberRoleLearner:
		return memberObservation{health: etcd.Unhealthy, reason: v1alpha1.EtcdMemberNotHealthyReason,
			message: "Waiting for learner etcd member to be promoted"}
	}
	return memberObservation{health: etcd.Health(on[0].Health), reason: on[0].Reason, message: on[0].Message}
}

// writeMemberConditions writes each Machine's EtcdAdapterMemberHealthy condition where it changed,
// with Cluster API's patch helper owning that one condition: the patch carries the Machine's
// other conditions as the apiserver has them, so the Machine controller's and the control-plane
// provider's conditions are never overwritten, and a conflict on ours is retried on the latest
// Machine.
func (r *Reconciler) writeMemberConditions(ctx context.Context, updates []memberConditionUpdate) error {
	var errs []error
	for _, u := range updates {
		if err := r.setMemberCondition(ctx, u.machine, u.condition); err != nil {
			errs = append(errs, err)
		}
	}
	return kerrors.NewAggregate(errs)
}

// setMemberCondition patches the Machine's EtcdAdapterMemberHealthy condition, touching no other
// condition, when that changes anything. A Machine that is gone is not an error.
func (r *Reconciler) setMemberCondition(ctx context.Context, m *clusterv1.Machine, c metav1.Condition) error {
	m = m.DeepCopy()
	helper, err := patch.NewHelper(m, r.Client)
	if err != nil {
		return fmt.Errorf("failed to create a patch helper for Machine %s: %w", klog.KObj(m), err)
	}
	conditions.Set(m, c)
	err = helper.Patch(ctx, m, patch.WithOwnedConditions{Conditions: []string{v1alpha1.MemberHealthyMachineCondition}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to patch the %s condition of Machine %s: %w", v1alpha1.MemberHealthyMachineCondition, klog.KObj(m), err)
	}
	return nil
}
