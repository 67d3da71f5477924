package main

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func goMod(module string, requires ...string) []byte {
	s := "module " + module + "\n\ngo 1.23.0\n\nrequire (\n"
	for _, r := range requires {
		s += "\t" + r + "\n"
	}
	s += ")\n\nreplace github.com/etcd-adapter/etcd-adapter/pkg/etcd => ../etcd\n"
	return []byte(s)
}

func TestRefusals(t *testing.T) {
	tests := []struct {
		name     string
		k3s      []byte
		version  string
		refusals int
		wantErr  bool
	}{
		{name: "the placeholder v0.0.0 between releases is refused", k3s: goMod("github.com/etcd-adapter/etcd-adapter/pkg/k3s", "github.com/etcd-adapter/etcd-adapter/pkg/etcd v0.0.0", "k8s.io/api v0.32.3"), version: "v0.1.0", refusals: 1},
		{name: "a pseudo-version is refused", k3s: goMod("github.com/etcd-adapter/etcd-adapter/pkg/k3s", "github.com/etcd-adapter/etcd-adapter/pkg/etcd v0.0.0-00010101000000-000000000000"), version: "v0.1.0", refusals: 1},
		{name: "the previous release is refused", k3s: goMod("github.com/etcd-adapter/etcd-adapter/pkg/k3s", "github.com/etcd-adapter/etcd-adapter/pkg/etcd v0.1.0"), version: "v0.2.0", refusals: 1},
		{name: "the version being tagged passes, whatever the replace and the other requires", k3s: goMod("github.com/etcd-adapter/etcd-adapter/pkg/k3s", "github.com/etcd-adapter/etcd-adapter/pkg/etcd v0.2.0", "k8s.io/api v0.32.3"), version: "v0.2.0"},
		{name: "a version that is not a release is an error", k3s: goMod("github.com/etcd-adapter/etcd-adapter/pkg/k3s"), version: "0.2", wantErr: true},
		{name: "v0.0.0 itself is an error", k3s: goMod("github.com/etcd-adapter/etcd-adapter/pkg/k3s"), version: "v0.0.0", wantErr: true},
		{name: "an unparsable go.mod is an error", k3s: []byte("module (\n"), version: "v0.1.0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Refusals(map[string][]byte{"pkg/k3s/go.mod": tt.k3s}, tt.version)
			if tt.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(HaveLen(tt.refusals))
			for _, r := range got {
				g.Expect(r).To(And(HavePrefix("pkg/k3s/go.mod requires github.com/etcd-adapter/etcd-adapter/pkg/etcd "), ContainSubstring(tt.version)))
			}
		})
	}
}

// The check reads this repository's own go.mod files: every require of a sibling module in a
// tagged module is found (none is at v9.9.9), so none can slip through at a release.
func TestRun_findsTheSiblingRequiresOfThisRepository(t *testing.T) {
	g := NewWithT(t)
	got, err := run(filepath.Join("..", ".."), "v9.9.9")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(ConsistOf(
		HavePrefix("go.mod requires github.com/etcd-adapter/etcd-adapter/pkg/etcd "),
		HavePrefix("go.mod requires github.com/etcd-adapter/etcd-adapter/pkg/k3s "),
		HavePrefix("pkg/k3s/go.mod requires github.com/etcd-adapter/etcd-adapter/pkg/etcd "),
	))
}
