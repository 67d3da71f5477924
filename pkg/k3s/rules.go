package k3s

import (
	"fmt"
	"slices"
	"strings"
)

// clusterRules are the K3s rules a whole cluster's Nodes are read by. Only the etcd leader's K3s
// writes EtcdIsVoter, for every Node, and the member controller runs on whichever server holds
// the Lease; neither is visible on Nodes. So in a cluster whose servers run different versions
// (a rolling upgrade), a rule holds only when every etcd server's version has it: a 1.28.4
// leader reports a dead member as a healthy voter, also onto a Node that runs 1.30.
type clusterRules struct {
	// oldest is the oldest version among the etcd Nodes that host a member.
	oldest Version
	// versions are the distinct versions seen, sorted, for messages.
	versions []string
	// err is set when a Node's version does not parse: then no rule is known.
	err error

	voter, health, exact, movesLeader, deletesRemove, retriesRejection bool
}

// rulesOf computes the rules from the etcd Nodes that host a member (all of them when none
// does): a removed server's K3s leads nothing.
func rulesOf(all []etcdNode) clusterRules {
	var hosting []etcdNode
	for _, e := range all {
		if e.hostsMember() {
			hosting = append(hosting, e)
		}
	}
	if len(hosting) == 0 {
		hosting = all
	}
	r := clusterRules{voter: true, health: true, exact: true, movesLeader: true, deletesRemove: true}
	for i, e := range hosting {
		if e.versionErr != nil {
			r.err = fmt.Errorf("Node %s: %w", e.node.Name, e.versionErr) //nolint:staticcheck // "Node" is the Kubernetes kind, spelled as the API spells it
			return r
		}
		v := e.version
		if i == 0 || v.olderThan(r.oldest) {
			r.oldest = v
		}
		if !slices.Contains(r.versions, v.Raw) {
			r.versions = append(r.versions, v.Raw)
		}
		r.voter = r.voter && v.HasEtcdIsVoter()
		r.health = r.health && v.HasHealthReasons()
		r.exact = r.exact && v.ExactMemberMatch()
		r.movesLeader = r.movesLeader && v.MovesLeader()
		r.deletesRemove = r.deletesRemove && v.DeletesRemoveOnSuccess()
		r.retriesRejection = r.retriesRejection || v.RetriesRejection()
	}
	slices.Sort(r.versions)
	return r
}

// known reports whether every Node's version parsed.
func (r clusterRules) known() bool { return r.err == nil && r.oldest.Raw != "" }

// String names the version whose rules apply, and why when the servers run several.
func (r clusterRules) String() string {
	if len(r.versions) <= 1 {
		return r.oldest.Raw
	}
	return fmt.Sprintf("%s (the oldest of the etcd servers' versions %s: the etcd leader's K3s writes every Node's condition and the leader is not visible on Nodes)",
		r.oldest.Raw, strings.Join(r.versions, ", "))
}

// leaseName is where the member controller's leader election lives, for messages.
func (r clusterRules) leaseName() string {
	program := programK3s
	if r.oldest.Program != "" {
		program = r.oldest.Program
	}
	return "kube-system/" + program + "-etcd"
}
