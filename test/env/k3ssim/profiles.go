package k3ssim

import (
	"fmt"
	"regexp"
	"strconv"
)

// RemovalBehavior is the member controller generation of a K3s version (contract, "Version
// differences the simulator must be able to reproduce").
type RemovalBehavior int

const (
	// RemovalLegacy is K3s 1.22 – 1.28.2: `remove` stays "true" after a successful removal, a
	// rejoin under a new name deletes `removed-node-name` and sets `remove="false"`, and an
	// etcd rejection is an ordinary error (requeued, `remove` kept). `removed-node-name` is
	// checked before `node-name`/`node-address`, so a removed Node is a quiet no-op.
	RemovalLegacy RemovalBehavior = iota
	// RemovalRequeueBug is K3s 1.28.3 – 1.34.1 (including 1.32.0 – 1.32.9): as legacy on
	// success, but a rejection clears `remove` and a rejoin deletes both annotations. The
	// `node-name`/`node-address` check runs first whenever `remove` is present, so a removed
	// Node (which keeps `remove="true"` and lost `node-name`) is requeued forever until the
	// dead server rejoins and writes `node-name` again.
	RemovalRequeueBug
	// RemovalLeaderAware is K3s 1.34.2+ and 1.32.10+: leadership is moved off the member first
	// (rejected when there is no other voter) and `remove` is deleted on success.
	RemovalLeaderAware
)

// String names the behaviour for test output.
func (b RemovalBehavior) String() string {
	switch b {
	case RemovalLegacy:
		return "legacy"
	case RemovalRequeueBug:
		return "requeue-bug"
	case RemovalLeaderAware:
		return "leader-aware"
	}
	return fmt.Sprintf("RemovalBehavior(%d)", int(b))
}

// Profile is what one K3s (or RKE2) version does with Node objects, derived from its version
// string by ParseProfile.
type Profile struct {
	// Version is the version string as given, e.g. "v1.33.4+k3s1"; the simulator writes it to
	// status.nodeInfo.kubeletVersion.
	Version string
	// Program is "k3s" or "rke2"; it only changes the annotation prefix.
	Program string
	// Minor and Patch of the 1.x version.
	Minor, Patch int
	// Keys are the annotation keys of Program.
	Keys Keys
	// HasEtcdIsVoter says whether the condition exists (1.28.4 / 1.27.8 / 1.26.11 and later).
	HasEtcdIsVoter bool
	// HasHealthReasons says whether the Unhealthy and NotAMember reasons exist (1.29.1 /
	// 1.28.6 / 1.27.10 / 1.26.13 and later); before, only MemberNotLearner and
	// MemberIsLearner.
	HasHealthReasons bool
	// ExactMemberMatch says whether members match Nodes by member.Name == node-name
	// annotation (1.29.3 and later); before, by the prefix `<node-name>-` of the member name.
	ExactMemberMatch bool
	// MasterLabel says whether the server also gets node-role.kubernetes.io/master=true.
	MasterLabel bool
	// Removal is the member controller generation.
	Removal RemovalBehavior
}

// minSupportedMinor is the oldest K3s the contract describes (1.22).
const minSupportedMinor = 22

// masterLabelUntilMinor is the first minor that no longer sets the master label.
// NOTE: the contract only says "no longer set since mid-2025"; 1.33 is the simulator's
// assumption for that cut-off, and nothing in the contract depends on the exact minor.
const masterLabelUntilMinor = 33

var versionPattern = regexp.MustCompile(`^v?1\.(\d+)\.(\d+)(?:-[0-9A-Za-z.-]+)?\+(k3s|rke2r)\d+$`)

// ParseProfile returns the profile of a K3s or RKE2 version string such as "v1.33.4+k3s1" or
// "v1.32.10+rke2r1".
func ParseProfile(version string) (Profile, error) {
	m := versionPattern.FindStringSubmatch(version)
	if m == nil {
		return Profile{}, fmt.Errorf("failed to parse K3s version %q: want v1.<minor>.<patch>+k3s<n> or +rke2r<n>", version)
	}
	minor, err := strconv.Atoi(m[1])
	if err != nil {
		return Profile{}, fmt.Errorf("failed to parse minor of K3s version %q: %w", version, err)
	}
	patch, err := strconv.Atoi(m[2])
	if err != nil {
		return Profile{}, fmt.Errorf("failed to parse patch of K3s version %q: %w", version, err)
	}
	if minor < minSupportedMinor {
		return Profile{}, fmt.Errorf("K3s version %q is older than 1.%d, which the contract does not describe", version, minSupportedMinor)
	}
	program := "k3s"
	if m[3] == "rke2r" {
		program = "rke2"
	}
	v := semver{minor: minor, patch: patch}
	return Profile{
		Version:          version,
		Program:          program,
		Minor:            minor,
		Patch:            patch,
		Keys:             keysFor(program),
		HasEtcdIsVoter:   v.atLeastOnBranch(map[int]int{26: 11, 27: 8, 28: 4}, 29),
		HasHealthReasons: v.atLeastOnBranch(map[int]int{26: 13, 27: 10, 28: 6, 29: 1}, 30),
		ExactMemberMatch: v.atLeastOnBranch(map[int]int{29: 3}, 30),
		MasterLabel:      minor < masterLabelUntilMinor,
		Removal:          removalBehavior(v),
	}, nil
}

// MustParseProfile is ParseProfile for constant versions in tests; it panics on error.
func MustParseProfile(version string) Profile {
	p, err := ParseProfile(version)
	if err != nil {
		panic(err)
	}
	return p
}

// removalBehavior maps a version onto the three member controller generations.
func removalBehavior(v semver) RemovalBehavior {
	switch {
	case v.atLeastOnBranch(map[int]int{32: 10, 34: 2}, 35):
		return RemovalLeaderAware
	case v.minor < 28 || (v.minor == 28 && v.patch <= 2):
		return RemovalLegacy
	default:
		return RemovalRequeueBug
	}
}

// semver is a 1.minor.patch version.
type semver struct{ minor, patch int }

// atLeastOnBranch reports whether v has a feature that was backported to the given release
// branches (minor → first patch) and is in every release from minor allFrom on.
func (v semver) atLeastOnBranch(branches map[int]int, allFrom int) bool {
	if v.minor >= allFrom {
		return true
	}
	first, ok := branches[v.minor]
	return ok && v.patch >= first
}
