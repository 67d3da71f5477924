package k3ssim

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseProfile(t *testing.T) {
	tests := []struct {
		version          string
		program          string
		hasEtcdIsVoter   bool
		hasHealthReasons bool
		exactMatch       bool
		master           bool
		removal          RemovalBehavior
	}{
		{"v1.22.17+k3s1", "k3s", false, false, false, true, RemovalLegacy},
		{"v1.26.5+k3s1", "k3s", false, false, false, true, RemovalLegacy},
		{"v1.26.11+k3s2", "k3s", true, false, false, true, RemovalLegacy},
		{"v1.26.13+k3s1", "k3s", true, true, false, true, RemovalLegacy},
		{"v1.27.8+k3s1", "k3s", true, false, false, true, RemovalLegacy},
		{"v1.27.10+k3s1", "k3s", true, true, false, true, RemovalLegacy},
		{"v1.28.2+k3s1", "k3s", false, false, false, true, RemovalLegacy},
		{"v1.28.3+k3s1", "k3s", false, false, false, true, RemovalRequeueBug},
		{"v1.28.4+k3s1", "k3s", true, false, false, true, RemovalRequeueBug},
		{"v1.28.6+k3s1", "k3s", true, true, false, true, RemovalRequeueBug},
		{"v1.29.0+k3s1", "k3s", true, false, false, true, RemovalRequeueBug},
		{"v1.29.1+k3s1", "k3s", true, true, false, true, RemovalRequeueBug},
		{"v1.29.3+k3s1", "k3s", true, true, true, true, RemovalRequeueBug},
		{"v1.32.9+k3s1", "k3s", true, true, true, true, RemovalRequeueBug},
		{"v1.32.10+k3s1", "k3s", true, true, true, true, RemovalLeaderAware},
		{"v1.33.4+k3s1", "k3s", true, true, true, false, RemovalRequeueBug},
		{"v1.34.1+k3s1", "k3s", true, true, true, false, RemovalRequeueBug},
		{"v1.34.2+k3s1", "k3s", true, true, true, false, RemovalLeaderAware},
		{"v1.35.0+k3s1", "k3s", true, true, true, false, RemovalLeaderAware},
		{"v1.34.2+rke2r1", "rke2", true, true, true, false, RemovalLeaderAware},
		{"1.30.1-rc1+rke2r2", "rke2", true, true, true, true, RemovalRequeueBug},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			g := NewWithT(t)
			p, err := ParseProfile(tt.version)
			g.Expect(err).ToNot(HaveOccurred())
			g.Expect(p.Version).To(Equal(tt.version))
			g.Expect(p.Program).To(Equal(tt.program))
			g.Expect(p.HasEtcdIsVoter).To(Equal(tt.hasEtcdIsVoter), "HasEtcdIsVoter")
			g.Expect(p.HasHealthReasons).To(Equal(tt.hasHealthReasons), "HasHealthReasons")
			g.Expect(p.ExactMemberMatch).To(Equal(tt.exactMatch), "ExactMemberMatch")
			g.Expect(p.MasterLabel).To(Equal(tt.master), "MasterLabel")
			g.Expect(p.Removal).To(Equal(tt.removal), "Removal")
			g.Expect(p.Keys.NodeName).To(Equal("etcd." + tt.program + ".cattle.io/node-name"))
			g.Expect(p.Keys.RemovedNodeName).To(Equal("etcd." + tt.program + ".cattle.io/removed-node-name"))
		})
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
