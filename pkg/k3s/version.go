package k3s

import (
	"fmt"
	"regexp"
	"strconv"
)

// Version is a K3s or RKE2 version, read from a Node's status.nodeInfo.kubeletVersion (for
// example "v1.33.4+k3s1", "v1.32.10+rke2r1", or a development build "v1.34.2+k3s-1a2b3c4d"),
// with the per-version behaviour of K3s's embedded-etcd controllers.
//
// Important: a Node's own version does not say which rules its EtcdIsVoter condition follows:
// only the etcd leader's K3s writes that condition, for every Node, and the member controller
// runs on whichever server holds the Lease. Read a cluster by ClusterRules, not per Node.
type Version struct {
	// Raw is the version as the Node reports it.
	Raw string
	// Program is "k3s" or "rke2".
	Program string
	// Minor and Patch of the 1.x version.
	Minor, Patch int
}

// versionPattern matches K3s's and RKE2's kubelet versions: a release (+k3sN, +rke2rN) or a
// development build (+k3s-<sha>, +rke2-<sha>).
var versionPattern = regexp.MustCompile(`^v?1\.(\d+)\.(\d+)(?:-[0-9A-Za-z.-]+)?\+(?:(k3s)(?:\d+|-[0-9A-Za-z.]+)|(rke2)(?:r\d+|-[0-9A-Za-z.]+))$`)

// ParseVersion parses a K3s or RKE2 kubelet version.
func ParseVersion(raw string) (Version, error) {
	m := versionPattern.FindStringSubmatch(raw)
	if m == nil {
		return Version{}, fmt.Errorf("kubeletVersion %q is not a K3s (+k3sN) or RKE2 (+rke2rN) version", raw)
	}
	minor, err := strconv.Atoi(m[1])
	if err != nil {
		return Version{}, fmt.Errorf("failed to parse minor of %q: %w", raw, err)
	}
	patch, err := strconv.Atoi(m[2])
	if err != nil {
		return Version{}, fmt.Errorf("failed to parse patch of %q: %w", raw, err)
	}
	program := programK3s
	if m[4] == programRKE2 {
		program = programRKE2
	}
	return Version{Raw: raw, Program: program, Minor: minor, Patch: patch}, nil
}

// String returns the version as the Node reports it.
func (v Version) String() string { return v.Raw }

// olderThan orders versions by minor, then patch.
func (v Version) olderThan(o Version) bool {
	return v.Minor < o.Minor || (v.Minor == o.Minor && v.Patch < o.Patch)
}

// HasEtcdIsVoter reports whether K3s writes the EtcdIsVoter condition: 1.28.4 / 1.27.8 /
// 1.26.11 / 1.25.16 and later (pkg/etcd/etcd.go, the leader's member-status pass).
func (v Version) HasEtcdIsVoter() bool {
	return v.atLeastOnBranch(map[int]int{25: 16, 26: 11, 27: 8, 28: 4}, 29)
}

// HasHealthReasons reports whether EtcdIsVoter carries the Unhealthy and NotAMember reasons,
// i.e. whether K3s checks member health at all: 1.29.1 / 1.28.6 / 1.27.10 / 1.26.13 and later.
// Before, a voter is reported MemberNotLearner whatever its health, and a Node that matches no
// member is skipped.
func (v Version) HasHealthReasons() bool {
	return v.atLeastOnBranch(map[int]int{26: 13, 27: 10, 28: 6, 29: 1}, 30)
}

// ExactMemberMatch reports whether K3s matches a member to a Node by member name == node-name
// annotation: 1.29.3 / 1.28.8 / 1.27.12 / 1.26.15 and later. Before, by the prefix
// `<node-name>-` of the member name.
func (v Version) ExactMemberMatch() bool {
	return v.atLeastOnBranch(map[int]int{26: 15, 27: 12, 28: 8, 29: 3}, 30)
}

// MovesLeader reports whether K3s moves leadership off a member before removing it (K3s PR
// 12908): 1.34.2 / 1.32.10 / 1.31.14 and later. Whether 1.33.6 got the backport is not
// verified, so the 1.33 line counts as not moving it: the warning then announces an election
// that may not happen, never the other way round.
func (v Version) MovesLeader() bool {
	return v.atLeastOnBranch(map[int]int{31: 14, 32: 10, 34: 2}, 35)
}

// DeletesRemoveOnSuccess reports whether K3s deletes `remove` with its success patch, which
// ends the requeue of a removed Node (K3s PR 12920, a fix separate from PR 12908, on the same
// releases; 1.33 counted out likewise). Before, `remove=true` stays after a success.
func (v Version) DeletesRemoveOnSuccess() bool {
	return v.atLeastOnBranch(map[int]int{31: 14, 32: 10, 34: 2}, 35)
}

// KeepsRemoveAfterSuccess reports whether `remove=true` stays on the Node after a successful
// removal.
func (v Version) KeepsRemoveAfterSuccess() bool { return !v.DeletesRemoveOnSuccess() }

// RetriesRejection reports whether K3s keeps `remove` and retries after etcd refused the
// removal as "not enough started members", instead of deleting `remove` (K3s PR 8392, in
// 1.28.3 / 1.27.7 / 1.26.10 / 1.25.15). On those versions a rejection looks like a removal
// that never finishes.
func (v Version) RetriesRejection() bool {
	return !v.atLeastOnBranch(map[int]int{25: 15, 26: 10, 27: 7, 28: 3}, 29)
}

// RequeuesForever reports whether K3s's member controller requeues a removed Node forever
// while its server is down (between the two fixes above): harmless for this backend, which
// never reads `remove` to decide that a removal finished.
func (v Version) RequeuesForever() bool { return !v.RetriesRejection() && !v.DeletesRemoveOnSuccess() }

// LeaseName is the Lease the member controller is leader-elected with, in kube-system.
func (v Version) LeaseName() string { return v.Program + "-etcd" }

// atLeastOnBranch reports whether v has a change that was backported to the given release
// branches (minor → first patch) and is in every release from minor allFrom on.
func (v Version) atLeastOnBranch(branches map[int]int, allFrom int) bool {
	if v.Minor >= allFrom {
		return true
	}
	first, ok := branches[v.Minor]
	return ok && v.Patch >= first
}
