package quorumguard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/pkg/capimachine"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// observe observes the Cluster's etcd, at most ObserveTimeout.
func (g *Guard) observe(ctx context.Context, cluster *clusterv1.Cluster, cpe *v1alpha1.ControlPlaneEtcd) (*etcd.Snapshot, error) {
	timeout := g.ObserveTimeout
	if timeout <= 0 {
		timeout = DefaultObserveTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	backend, err := g.Backends.For(ctx, cluster, cpe.Spec.Backend)
	if err != nil {
		return nil, err
	}
	return backend.Observe(ctx)
}

// project asks the quorum projection about the members of every Machine already being deleted,
// in the order they will be removed, and then the members of this one, on the observation snap
// (or, when etcd could not be observed, err).
func (g *Guard) project(d deletion, all []clusterv1.Machine, underWay []*clusterv1.Machine, snap *etcd.Snapshot, err error) outcome {
	cluster, cpe, m := d.cluster, d.cpe, d.m
	along := alongWith(underWay)
	if err != nil {
		_, byAddress := m.Labels[backends.EtcdClusterLabel]
		if lastEtcdMachine(all, underWay, m, byAddress) {
			others := "control-plane Machine with a Node"
			if byAddress {
				others = "etcd Machine with an address"
			}
			return denied(cpe, v1alpha1.EventDeletionRefusedLastMember, lastMemberMessage(m, cluster, along,
				fmt.Sprintf("etcd could not be observed (%v), and every other %s is being deleted", err, others)))
		}
		return unobserved(d, underWay, err)
	}
	now := time.Now()
	going := make([]etcd.Machine, 0, len(underWay)+1)
	for _, u := range append(slices.Clip(underWay), m) {
		f := capimachine.Facts(u)
		f.MemberRemover = memberRemover(u, cpe, d.embeddedHook)
		going = append(going, f)
	}
	facts := make([]etcd.Machine, 0, len(all))
	for i := range all {
		facts = append(facts, capimachine.Facts(&all[i]))
	}
	verdict := etcd.CanRemoveMachines(snap, now, going, facts)
	switch {
	case verdict.Allowed:
		return allowed(verdict.Message)
	case verdict.Reason == v1alpha1.MemberRemovalHealthUnknownReason:
		// Note: unknown is not lost, and the message says so; but the members are there and no
		// removal of theirs is known to be safe, so the deletion hook would hold the Machine
		// anyway. Refusing here tells the person now, and which members to look at.
		return denied(cpe, v1alpha1.EventDeletionRefusedHealthUnknown, fmt.Sprintf(
			"deleting Machine %s of Cluster %s cannot be shown to keep etcd quorum (%s)%s: %s; members not healthy: %s. Find out why their health is unknown (their Nodes, the K3s servers), or set annotation %s=%s on the Machine to delete it anyway",
			m.Name, cluster.Name, verdict.Reason, along, verdict.Message, unhealthyMembers(snap, now), v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue))
	case verdict.Reason == v1alpha1.MemberRemovalLastMemberReason:
		return denied(cpe, v1alpha1.EventDeletionRefusedLastMember, lastMemberMessage(m, cluster, along, verdict.Message))
	}
	fix := "Fix them first"
	if len(underWay) > 0 {
		fix = "Fix them first or wait for the deletions under way"
	}
	return denied(cpe, v1alpha1.EventDeletionRefused, fmt.Sprintf(
		"deleting Machine %s would lose etcd quorum of Cluster %s (%s)%s: %s; members not healthy: %s. %s, or set annotation %s=%s on the Machine to delete it anyway",
		m.Name, cluster.Name, verdict.Reason, along, verdict.Message, unhealthyMembers(snap, now), fix, v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue))
}

// unobserved decides a deletion when etcd could not be observed (err), on the members the
// ControlPlaneEtcd's status last recorded (assessLastObservation).
func unobserved(d deletion, underWay []*clusterv1.Machine, err error) outcome {
	cluster, cpe, m := d.cluster, d.cpe, d.m
	var going, removedFirst []string
	for _, u := range append(slices.Clip(underWay), m) {
		going = append(going, u.Name)
		if memberRemover(u, cpe, d.embeddedHook) != "" {
			removedFirst = append(removedFirst, u.Name)
		}
	}
	cause := etcd.SanitizeText(err.Error(), etcd.MaxTextBytes)
	last := assessLastObservation(cpe.Status, going, removedFirst)
	switch {
	case !last.observed:
		// Note: a Cluster whose etcd was never observed has nothing to decide on (a first
		// control-plane Machine that failed to provision, whose remediation must not wait), so the
		// deletion goes through with a warning; the hook still removes a member only when safe.
		return allowedWithWarning(cpe, v1alpha1.EventDeletionAllowedEtcdUnobserved, fmt.Sprintf(
			"etcd of Cluster %s could not be observed (%s), and etcd-adapter has no earlier observation of it; deleting Machine %s%s may lose etcd quorum",
			cluster.Name, cause, m.Name, alongWith(underWay)))
	case last.quorum == etcd.QuorumHolds:
		return allowedWithWarning(cpe, v1alpha1.EventDeletionAllowedEtcdUnobserved, fmt.Sprintf(
			"etcd of Cluster %s could not be observed (%s); deleting Machine %s%s keeps etcd quorum only as etcd was last observed (members last seen unhealthy: %s), and may lose it",
			cluster.Name, cause, m.Name, alongWith(underWay), orNone(last.unhealthy)))
	}
	stopping := "its member stops"
	if len(underWay) > 0 {
		stopping = "its member and those of the deletions under way stop"
	}
	return denied(cpe, v1alpha1.EventDeletionRefusedHealthUnknown, fmt.Sprintf(
		"deleting Machine %s of Cluster %s cannot be shown to keep etcd quorum (%s)%s: etcd could not be observed (%s); as it was last observed (status.members of ControlPlaneEtcd %s), it would not keep quorum (%s) once %s; members last seen unhealthy: %s. A stacked etcd that lost quorum cannot be observed: bring its members back first, or set annotation %s=%s on the Machine to delete it anyway",
		m.Name, cluster.Name, v1alpha1.MemberRemovalHealthUnknownReason, alongWith(underWay), cause, cpe.Name, last.quorum, stopping,
		orNone(last.unhealthy), v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue))
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func lastMemberMessage(m *clusterv1.Machine, cluster *clusterv1.Cluster, along, why string) string {
	return fmt.Sprintf("deleting Machine %s would remove the last etcd member of Cluster %s (%s)%s: %s. To delete the control plane, delete the Cluster; to delete this Machine anyway, set annotation %s=%s on it",
		m.Name, cluster.Name, v1alpha1.MemberRemovalLastMemberReason, along, why, v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue)
}

// alongWith names the deletions under way for messages; empty when there are none.
func alongWith(underWay []*clusterv1.Machine) string {
	if len(underWay) == 0 {
		return ""
	}
	names := make([]string, 0, len(underWay))
	for _, u := range underWay {
		names = append(names, u.Name)
	}
	return fmt.Sprintf(" with the deletions of Machines %s already under way", strings.Join(names, ", "))
}

// lastEtcdMachine reports whether m is the only control-plane Machine with a Node that is not
// being deleted: when etcd cannot be observed, that is the Machine of the last member. A
// Machine without a Node hosts no member (Cluster API remediates a first control-plane Machine
// that failed to provision, and deleting it does not touch etcd).
//
// An etcdadm etcd Machine has no Node: one with an address (where the etcdadm controller starts
// its member, controllers/helpers.go getEtcdMachineAddress) counts as hosting one (byAddress).
func lastEtcdMachine(all []clusterv1.Machine, underWay []*clusterv1.Machine, m *clusterv1.Machine, byAddress bool) bool {
	hosts := func(o *clusterv1.Machine) bool {
		if byAddress {
			return len(o.Status.Addresses) > 0
		}
		return o.Status.NodeRef.Name != ""
	}
	if !hosts(m) {
		return false
	}
	for i := range all {
		o := &all[i]
		if o.Name == m.Name || !hosts(o) || !o.DeletionTimestamp.IsZero() ||
			slices.ContainsFunc(underWay, func(u *clusterv1.Machine) bool { return u.Name == o.Name }) {
			continue
		}
		return false
	}
	return true
}

// unhealthyMembers names the members that are not healthy, with why, for refusals.
func unhealthyMembers(s *etcd.Snapshot, now time.Time) string {
	var out []string
	for _, mh := range etcd.AssessMembers(s, now) {
		if mh.Health != etcd.Healthy {
			out = append(out, fmt.Sprintf("%s (%s: %s)", mh.Member, mh.Health, mh.Message))
		}
	}
	return orNone(out)
}
