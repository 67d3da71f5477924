package k3ssim

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseProfile(t *testing.T) {
	const (
		legacy = RemovalLegacy
		bug    = RemovalRequeueBug
		aware  = RemovalLeaderAware
	)
	tests := []struct {
		version                      string
		program                      string
		voter, health, exact, master bool
		removal                      RemovalBehavior
		movesLeader                  bool
	}{
		{"v1.22.17+k3s1", "k3s", false, false, false, true, legacy, false},
		{"v1.25.15+k3s1", "k3s", false, false, false, true, bug, false},
		{"v1.25.16+k3s1", "k3s", true, false, false, true, bug, false},
		{"v1.26.5+k3s1", "k3s", false, false, false, true, legacy, false},
		{"v1.26.10+k3s1", "k3s", false, false, false, true, bug, false},
		{"v1.26.11+k3s2", "k3s", true, false, false, true, bug, false},
		{"v1.26.13+k3s1", "k3s", true, true, false, true, bug, false},
		{"v1.26.15+k3s1", "k3s", true, true, true, true, bug, false},
		{"v1.27.6+k3s1", "k3s", false, false, false, true, legacy, false},
		{"v1.27.8+k3s1", "k3s", true, false, false, true, bug, false},
		{"v1.27.10+k3s1", "k3s", true, true, false, true, bug, false},
		{"v1.27.12+k3s1", "k3s", true, true, true, true, bug, false},
		{"v1.28.2+k3s1", "k3s", false, false, false, true, legacy, false},
		{"v1.28.3+k3s1", "k3s", false, false, false, true, bug, false},
		{"v1.28.4+k3s1", "k3s", true, false, false, true, bug, false},
		{"v1.28.6+k3s1", "k3s", true, true, false, true, bug, false},
		{"v1.28.8+k3s1", "k3s", true, true, true, true, bug, false},
		{"v1.29.0+k3s1", "k3s", true, false, false, true, bug, false},
		{"v1.29.1+k3s1", "k3s", true, true, false, true, bug, false},
		{"v1.29.3+k3s1", "k3s", true, true, true, true, bug, false},
		{"v1.31.14+k3s1", "k3s", true, true, true, true, aware, true},
		{"v1.32.9+k3s1", "k3s", true, true, true, true, bug, false},
		{"v1.32.10+k3s1", "k3s", true, true, true, true, aware, true},
		{"v1.33.4+k3s1", "k3s", true, true, true, false, bug, false},
		{"v1.33.6+k3s1", "k3s", true, true, true, false, bug, false},
		{"v1.34.1+k3s1", "k3s", true, true, true, false, bug, false},
		{"v1.34.2+k3s1", "k3s", true, true, true, false, aware, true},
		{"v1.34.2+k3s-1a2b3c4d", "k3s", true, true, true, false, aware, true},
		{"v1.35.0+k3s1", "k3s", true, true, true, false, aware, true},
		{"v1.34.2+rke2r1", "rke2", true, true, true, false, aware, true},
		{"1.30.1-rc1+rke2r2", "rke2", true, true, true, true, bug, false},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			g := NewWithT(t)
			p, err := ParseProfile(tt.version)
			g.Expect(err).ToNot(HaveOccurred())
			g.Expect(p.Version).To(Equal(tt.version))
			g.Expect(p.Program).To(Equal(tt.program))
			g.Expect(p.HasEtcdIsVoter).To(Equal(tt.voter), "HasEtcdIsVoter")
			g.Expect(p.HasHealthReasons).To(Equal(tt.health), "HasHealthReasons")
			g.Expect(p.ExactMemberMatch).To(Equal(tt.exact), "ExactMemberMatch")
			g.Expect(p.MasterLabel).To(Equal(tt.master), "MasterLabel")
			g.Expect(p.Removal).To(Equal(tt.removal), "Removal")
			g.Expect(p.MovesLeaderFirst).To(Equal(tt.movesLeader), "MovesLeaderFirst (PR 12908)")
			g.Expect(p.DeletesRemoveOnSuccess).To(Equal(tt.removal == aware), "DeletesRemoveOnSuccess (PR 12920)")
			g.Expect(p.ClearsRemoveOnRejection).To(Equal(tt.removal != legacy), "ClearsRemoveOnRejection (PR 8392)")
			g.Expect(p.Keys.NodeName).To(Equal("etcd." + tt.program + ".cattle.io/node-name"))
			g.Expect(p.Keys.RemovedNodeName).To(Equal("etcd." + tt.program + ".cattle.io/removed-node-name"))
			g.Expect(p.LeaseName()).To(Equal(tt.program + "-etcd"))
		})
	}
}

// Test_change_in checks the reading of K3s's history itself: a change is in a release of a
// branch it landed on from that patch on, in every newer minor, and nowhere else.
func Test_change_in(t *testing.T) {
	c := change{landed: []string{"v1.34.2", "v1.32.10"}}
	tests := []struct {
		release release
		want    bool
	}{
		{release{34, 2}, true}, {release{34, 1}, false}, {release{35, 0}, true},
		{release{33, 9}, false}, {release{32, 10}, true}, {release{32, 9}, false}, {release{31, 99}, false},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		g.Expect(c.in(tt.release)).To(Equal(tt.want), "1.%d.%d", tt.release.minor, tt.release.patch)
	}
}

func TestParseProfile_rejects(t *testing.T) {
	for _, v := range []string{"", "v1.33.4", "v1.21.14+k3s1", "v2.0.0+k3s1", "v1.33+k3s1", "v1.33.4+kubeadm"} {
		t.Run(v, func(t *testing.T) {
			g := NewWithT(t)
			_, err := ParseProfile(v)
			g.Expect(err).To(HaveOccurred())
		})
	}
}
