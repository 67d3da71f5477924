package k3s

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		raw                                           string
		program                                       string
		voter, health, exact, moves, deletes, retries bool
		expectErr                                     bool
	}{
		{raw: "v1.25.15+k3s1", program: "k3s"},
		{raw: "v1.25.16+k3s1", program: "k3s", voter: true},
		{raw: "v1.26.5+k3s1", program: "k3s", retries: true},
		{raw: "v1.26.10+k3s1", program: "k3s"},
		{raw: "v1.26.11+k3s2", program: "k3s", voter: true},
		{raw: "v1.26.15+k3s1", program: "k3s", voter: true, health: true, exact: true},
		{raw: "v1.27.6+k3s1", program: "k3s", retries: true},
		{raw: "v1.27.10+k3s1", program: "k3s", voter: true, health: true},
		{raw: "v1.27.12+k3s1", program: "k3s", voter: true, health: true, exact: true},
		{raw: "v1.28.2+k3s1", program: "k3s", retries: true},
		{raw: "v1.28.4+k3s1", program: "k3s", voter: true},
		{raw: "v1.28.8+k3s1", program: "k3s", voter: true, health: true, exact: true},
		{raw: "v1.29.2+k3s1", program: "k3s", voter: true, health: true},
		{raw: "v1.29.3+k3s1", program: "k3s", voter: true, health: true, exact: true},
		{raw: "v1.31.14+k3s1", program: "k3s", voter: true, health: true, exact: true, moves: true, deletes: true},
		{raw: "v1.32.9+k3s1", program: "k3s", voter: true, health: true, exact: true},
		{raw: "v1.32.10+rke2r1", program: "rke2", voter: true, health: true, exact: true, moves: true, deletes: true},
		{raw: "v1.33.6+k3s1", program: "k3s", voter: true, health: true, exact: true},
		{raw: "v1.34.2+k3s1", program: "k3s", voter: true, health: true, exact: true, moves: true, deletes: true},
		{raw: "v1.34.2+k3s-1a2b3c4d", program: "k3s", voter: true, health: true, exact: true, moves: true, deletes: true},
		{raw: "v1.35.0-rc1+k3s1", program: "k3s", voter: true, health: true, exact: true, moves: true, deletes: true},
		{raw: "v1.33.4", expectErr: true},
		{raw: "v1.33.4+k3s", expectErr: true},
		{raw: "", expectErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			g := NewWithT(t)
			v, err := ParseVersion(tt.raw)
			if tt.expectErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).ToNot(HaveOccurred())
			g.Expect(v.Program).To(Equal(tt.program))
			g.Expect(v.HasEtcdIsVoter()).To(Equal(tt.voter), "EtcdIsVoter")
			g.Expect(v.HasHealthReasons()).To(Equal(tt.health), "health reasons")
			g.Expect(v.ExactMemberMatch()).To(Equal(tt.exact), "exact match")
			g.Expect(v.MovesLeader()).To(Equal(tt.moves), "moves leader (PR 12908)")
			g.Expect(v.DeletesRemoveOnSuccess()).To(Equal(tt.deletes), "deletes remove on success (PR 12920)")
			g.Expect(v.RetriesRejection()).To(Equal(tt.retries), "retries rejection")
		})
	}
}

func Test_rulesOf(t *testing.T) {
	g := NewWithT(t)
	r := rulesFor("v1.34.2+k3s1", "v1.28.8+k3s1", "v1.29.2+k3s1")
	g.Expect(r.oldest.Raw).To(Equal("v1.28.8+k3s1"))
	g.Expect(r.exact).To(BeFalse(), "1.29.2 is newer than 1.28.8 but lacks the exact match: every server's rules count")
	g.Expect(r.movesLeader).To(BeFalse())
	g.Expect(r.health).To(BeTrue())
	g.Expect(r.leaseName()).To(Equal("kube-system/k3s-etcd"))
	g.Expect(rulesFor("v1.32.10+rke2r1").leaseName()).To(Equal("kube-system/rke2-etcd"))
	g.Expect(rulesFor("v1.33.4").known()).To(BeFalse())
}

func TestMemberID(t *testing.T) {
	g := NewWithT(t)
	// FNV-1a 64 of the name, as documented: fixed values, not the function compared with itself.
	g.Expect(MemberID("")).To(Equal(uint64(0xcbf29ce484222325)))
	g.Expect(MemberID("a")).To(Equal(uint64(0xaf63dc4c8601ec8c)))
	g.Expect(MemberID("cp-0-1a2b3c4d")).ToNot(Equal(MemberID("cp-0-5e6f7a8b")))
	g.Expect(MemberID("cp-0-1a2b3c4d")).ToNot(BeZero())
}

func Test_readNode_keys(t *testing.T) {
	tests := []struct {
		name, version, annotation, wantPrefix string
	}{
		{name: "K3s version", version: "v1.33.4+k3s1", wantPrefix: "etcd.k3s.cattle.io/"},
		{name: "RKE2 version", version: "v1.32.10+rke2r1", wantPrefix: "etcd.rke2.cattle.io/"},
		{name: "unknown version with RKE2 annotations", version: "", annotation: "etcd.rke2.cattle.io/node-name", wantPrefix: "etcd.rke2.cattle.io/"},
		{name: "unknown version, nothing to tell", version: "v1.33.4", wantPrefix: "etcd.k3s.cattle.io/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			n := etcdNodeObj("cp-0", tt.version, "")
			if tt.annotation != "" {
				n.Annotations[tt.annotation] = "cp-0-00000000"
			}
			e := readNode(n)
			g.Expect(e.keys.NodeName).To(Equal(tt.wantPrefix + "node-name"))
			g.Expect(e.keys.RemovedNodeName).To(Equal(tt.wantPrefix + "removed-node-name"))
			if tt.annotation != "" {
				g.Expect(e.memberName).To(Equal("cp-0-00000000"))
			}
		})
	}
}
