package k3ssim

import (
	"fmt"
	"regexp"
	"strconv"
)

// RemovalBehavior is the member controller generation of a K3s version (k3s pkg/etcd/member_controller.go,
// as PR 8392 and PR 12920 changed it).
type RemovalBehavior int

const (
	// RemovalLegacy is K3s before PR 8392: `remove` stays "true" after a successful removal, a
	// rejoin under a new name deletes `removed-node-name` and sets `remove="false"`, and an
	// etcd rejection is an ordinary error (requeued, `remove` kept). `removed-node-name` is
	// checked before `node-name`/`node-address`, so a removed Node is a quiet no-op.
	RemovalLegacy RemovalBehavior = iota
	// RemovalRequeueBug is K3s with PR 8392 and without PR 12920: as legacy on
	// success, but a rejection clears `remove` and a rejoin deletes both annotations. The
	// `node-name`/`node-address` check runs first whenever `remove` is present, so a removed
	// Node (which keeps `remove="true"` and lost `node-name`) is requeued forever until the
	// dead server rejoins and writes `node-name` again.
	RemovalRequeueBug
	// RemovalLeaderAware is K3s with PR 12920 (1.34.2 / 1.32.10 / 1.31.14 and later):
	// `remove` is deleted on success and the rejoin check runs on removed-node-name alone.
	// Moving leadership first (PR 12908) is a separate flag, Profile.MovesLeaderFirst.
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
// string by ParseProfile, one behaviour flag per controller as K3s's history (history.go) has
// them.
type Profile struct {
	// Version is the version string as given, e.g. "v1.33.4+k3s1"; the simulator writes it to
	// status.nodeInfo.kubeletVersion.
	Version string
	// Program is "k3s" or "rke2"; it changes the annotation prefix and the Lease name.
	Program string
	// Minor and Patch of the 1.x version.
	Minor, Patch int
	// Keys are the annotation keys of Program.
	Keys Keys

	// The etcd leader's member-status pass (k3s pkg/etcd/etcd.go).

	// HasEtcdIsVoter: the pass writes EtcdIsVoter (changeVoterCondition).
	HasEtcdIsVoter bool
	// HasHealthReasons: the pass checks health and writes Unhealthy and NotAMember
	// (changeHealthCheck); before, only MemberNotLearner and MemberIsLearner.
	HasHealthReasons bool
	// ExactMemberMatch: members match Nodes by member.Name == node-name annotation
	// (changeExactMatch); before, by the prefix `<node-name>-` of the member name.
	ExactMemberMatch bool

	// HasSnapshotFiles: snapshots are listed as ETCDSnapshotFile objects (changeSnapshotFiles).
	HasSnapshotFiles bool

	// The metadata controller (k3s pkg/etcd/metadata_controller.go).

	// MasterLabel says whether the server also gets node-role.kubernetes.io/master=true.
	MasterLabel bool

	// The member controller (k3s pkg/etcd/member_controller.go).

	// ClearsRemoveOnRejection (changeClearOnReject, PR 8392).
	ClearsRemoveOnRejection bool
	// MovesLeaderFirst (changeMoveLeader, PR 12908).
	MovesLeaderFirst bool
	// DeletesRemoveOnSuccess (changeEndRequeue, PR 12920).
	DeletesRemoveOnSuccess bool
	// Removal is the member controller's order of checks, which PR 8392 and PR 12920 changed.
	Removal RemovalBehavior
}

// minSupportedMinor is the oldest K3s the simulator describes (1.22).
const minSupportedMinor = 22

// masterLabelUntilMinor is the first minor that no longer sets the master label.
// NOTE: K3s stopped setting it in mid-2025; 1.33 is the simulator's assumption for that cut-off,
// and nothing depends on the exact minor.
const masterLabelUntilMinor = 33

// versionPattern matches a K3s or RKE2 kubelet version: a release (+k3sN, +rke2rN) or a
// development build (+k3s-<sha>).
var versionPattern = regexp.MustCompile(`^v?1\.(\d+)\.(\d+)(?:-[0-9A-Za-z.-]+)?\+(k3s|rke2)(?:r?\d+|-[0-9A-Za-z.]+)$`)

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
		return Profile{}, fmt.Errorf("K3s version %q is older than 1.%d, which the simulator does not describe", version, minSupportedMinor)
	}
	r := release{minor: minor, patch: patch}
	p := Profile{
		Version:                 version,
		Program:                 m[3],
		Minor:                   minor,
		Patch:                   patch,
		Keys:                    keysFor(m[3]),
		HasEtcdIsVoter:          changeVoterCondition.in(r),
		HasHealthReasons:        changeHealthCheck.in(r),
		ExactMemberMatch:        changeExactMatch.in(r),
		HasSnapshotFiles:        changeSnapshotFiles.in(r),
		MasterLabel:             minor < masterLabelUntilMinor,
		ClearsRemoveOnRejection: changeClearOnReject.in(r),
		MovesLeaderFirst:        changeMoveLeader.in(r),
		DeletesRemoveOnSuccess:  changeEndRequeue.in(r),
	}
	switch {
	case p.DeletesRemoveOnSuccess:
		p.Removal = RemovalLeaderAware
	case p.ClearsRemoveOnRejection:
		p.Removal = RemovalRequeueBug
	default:
		p.Removal = RemovalLegacy
	}
	return p, nil
}

// MustParseProfile is ParseProfile for constant versions in tests; it panics on error.
func MustParseProfile(version string) Profile {
	p, err := ParseProfile(version)
	if err != nil {
		panic(err)
	}
	return p
}

// LeaseName is the Lease the member controller is leader-elected with, in kube-system.
func (p Profile) LeaseName() string { return p.Program + "-etcd" }
