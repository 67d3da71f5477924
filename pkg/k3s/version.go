package k3s

import (
	"fmt"
	"regexp"
	"strconv"
)

// Version is a K3s or RKE2 version, read from a Node's status.nodeInfo.kubeletVersion (for
// example "v1.33.4+k3s1" or "v1.32.10+rke2r1"), with the contract's per-version rules.
type Version struct {
	// Raw is the version as the Node reports it.
	Raw string
	// Program is "k3s" or "rke2".
	Program string
	// Minor and Patch of the 1.x version.
	Minor, Patch int
}

// versionPattern matches K3s's and RKE2's kubelet versions.
var versionPattern = regexp.MustCompile(`^v?1\.(\d+)\.(\d+)(?:-[0-9A-Za-z.-]+)?\+(k3s|rke2r)\d+$`)

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
	if m[3] == "rke2r" {
		program = programRKE2
	}
	return Version{Raw: raw, Program: program, Minor: minor, Patch: patch}, nil
}

// String returns the version as the Node reports it.
func (v Version) String() string { return v.Raw }

// HasEtcdIsVoter reports whether K3s writes the EtcdIsVoter condition: 1.28.4 / 1.27.8 /
// 1.26.11 and later.
func (v Version) HasEtcdIsVoter() bool {
	return v.atLeastOnBranch(map[int]int{26: 11, 27: 8, 28: 4}, 29)
}

// HasHealthReasons reports whether EtcdIsVoter carries the Unhealthy and NotAMember reasons,
// i.e. whether K3s checks member health at all: 1.29.1 / 1.28.6 / 1.27.10 / 1.26.13 and later.
// Before, a voter is reported MemberNotLearner whatever its health.
func (v Version) HasHealthReasons() bool {
	return v.atLeastOnBranch(map[int]int{26: 13, 27: 10, 28: 6, 29: 1}, 30)
}

// ExactMemberMatch reports whether K3s matches a member to a Node by member name == node-name
// annotation (1.29.3 and later); before, by the prefix `<node-name>-` of the member name.
func (v Version) ExactMemberMatch() bool {
	return v.atLeastOnBranch(map[int]int{29: 3}, 30)
}

// MovesLeader reports whether K3s moves leadership off a member before removing it:
// 1.34.2 / 1.32.10 and later. Those versions also delete `remove` on success.
func (v Version) MovesLeader() bool {
	return v.atLeastOnBranch(map[int]int{32: 10, 34: 2}, 35)
}

// KeepsRemoveAfterSuccess reports whether `remove=true` stays on the Node after a successful
// removal (every version before 1.34.2 / 1.32.10).
func (v Version) KeepsRemoveAfterSuccess() bool { return !v.MovesLeader() }

// RetriesRejection reports whether K3s keeps `remove` and retries after etcd refused the
// removal (1.22 – 1.28.2), instead of deleting `remove` (1.28.3 and later). On those versions
// a rejection looks like a removal that never finishes.
func (v Version) RetriesRejection() bool {
	return v.Minor < 28 || (v.Minor == 28 && v.Patch <= 2)
}

// RequeuesForever reports whether K3s's member controller requeues a removed Node forever
// while its server is down (1.28.3 – 1.34.1, including 1.32.0 – 1.32.9): harmless for this
// backend, which never reads `remove` to decide that a removal finished.
func (v Version) RequeuesForever() bool { return !v.RetriesRejection() && !v.MovesLeader() }

// atLeastOnBranch reports whether v has a change that was backported to the given release
// branches (minor → first patch) and is in every release from minor allFrom on.
func (v Version) atLeastOnBranch(branches map[int]int, allFrom int) bool {
	if v.Minor >= allFrom {
		return true
	}
	first, ok := branches[v.Minor]
	return ok && v.Patch >= first
}
