package k3ssim

import (
	"fmt"
	"regexp"
	"strconv"
)

// change is one change to K3s's embedded-etcd code, as K3s's history has it: the upstream
// file and pull request, and the first release of every branch it landed on (the original
// and its backports). A release on a newer minor than every listed branch carries it too;
// a branch that is not listed does not (or it is not known to: K3s release notes are the
// source, and a branch whose backport is not confirmed is left out on purpose).
type change struct {
	// what the change did, in K3s's own terms.
	what string
	// where names the upstream K3s file and pull request.
	where string
	// landed lists the first release of each branch carrying the change, e.g. "v1.28.3".
	landed []string
}

// K3s's history of its embedded-etcd controllers, as far as Node objects show it. Each entry
// drives one behaviour flag of a controller (see Profile).
var (
	// changeVoterCondition: the etcd leader's member-status pass writes the EtcdIsVoter Node
	// condition (MemberNotLearner / MemberIsLearner only).
	changeVoterCondition = change{
		what:   "leader writes the EtcdIsVoter condition on etcd Nodes",
		where:  "k3s-io/k3s pkg/etcd/etcd.go (member status pass), November 2023 releases",
		landed: []string{"v1.28.4", "v1.27.8", "v1.26.11", "v1.25.16"},
	}
	// changeSnapshotFiles: every etcd snapshot (scheduled, on-demand, local or S3) is listed as
	// a cluster-scoped ETCDSnapshotFile (k3s.cattle.io/v1) that K3s creates when it saves the
	// snapshot and marks status.readyToUse once the file is written.
	changeSnapshotFiles = change{
		what:   "etcd snapshots are listed as ETCDSnapshotFile objects",
		where:  "k3s-io/k3s pkg/etcd/snapshot.go and pkg/apis/k3s.cattle.io/v1/types.go, PR 8064, November 2023 releases",
		landed: []string{"v1.28.4", "v1.27.8", "v1.26.11", "v1.25.16"},
	}
	// changeHealthCheck: the same pass checks each member with Status(ClientURLs[0]) and writes
	// Unhealthy with the error, and NotAMember for an etcd Node that matches no member.
	changeHealthCheck = change{
		what:   "EtcdIsVoter reports Unhealthy (Status error) and NotAMember",
		where:  "k3s-io/k3s pkg/etcd/etcd.go, January 2024 releases",
		landed: []string{"v1.29.1", "v1.28.6", "v1.27.10", "v1.26.13"},
	}
	// changeExactMatch: members are matched to Nodes by member.Name == node-name annotation
	// instead of a Node-name prefix of the member name.
	changeExactMatch = change{
		what:   "members match Nodes by the node-name annotation, not by a Node-name prefix",
		where:  "k3s-io/k3s pkg/etcd/etcd.go, March 2024 releases",
		landed: []string{"v1.29.3", "v1.28.8", "v1.27.12", "v1.26.15"},
	}
	// changeClearOnReject: the member controller deletes `remove` when etcd refuses the removal
	// as "not enough started members", and deletes both annotations on a rejoin; it checks
	// node-name/node-address first whenever `remove` is present, which requeues a removed Node
	// forever until its server writes node-name again.
	changeClearOnReject = change{
		what:   "member controller clears remove on a rejection; rejoin deletes both annotations",
		where:  "k3s-io/k3s pkg/etcd/member_controller.go, PR 8392",
		landed: []string{"v1.28.3", "v1.27.7", "v1.26.10", "v1.25.15"},
	}
	// changeMoveLeader: before MemberRemove, leadership is moved off the member to another
	// voter; with no other voter the removal is refused.
	changeMoveLeader = change{
		what:   "member controller moves leadership off a member before removing it",
		where:  "k3s-io/k3s pkg/etcd/member_controller.go, PR 12908",
		landed: []string{"v1.34.2", "v1.32.10", "v1.31.14"},
	}
	// changeEndRequeue: the success patch deletes `remove`, and the rejoin check runs on
	// removed-node-name alone, which ends the requeue of a removed Node.
	changeEndRequeue = change{
		what:   "success patch deletes remove; the rejoin check no longer needs it",
		where:  "k3s-io/k3s pkg/etcd/member_controller.go, PR 12920",
		landed: []string{"v1.34.2", "v1.32.10", "v1.31.14"},
	}
)

// in reports whether release v carries the change.
func (c change) in(v release) bool {
	newest := 0
	for _, tag := range c.landed {
		first := mustParseRelease(tag)
		if first.minor == v.minor {
			return v.patch >= first.patch
		}
		newest = max(newest, first.minor)
	}
	return v.minor > newest
}

// release is a K3s release line number, 1.minor.patch.
type release struct{ minor, patch int }

var releasePattern = regexp.MustCompile(`^v1\.(\d+)\.(\d+)$`)

func mustParseRelease(tag string) release {
	m := releasePattern.FindStringSubmatch(tag)
	if m == nil {
		panic(fmt.Sprintf("k3ssim: bad release tag %q in K3s's history", tag))
	}
	minor, _ := strconv.Atoi(m[1])
	patch, _ := strconv.Atoi(m[2])
	return release{minor: minor, patch: patch}
}
