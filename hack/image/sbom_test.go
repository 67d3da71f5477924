package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/mod/modfile"
)

// checkSBOM checks the SBOM the image holds beside the manager binary: an SPDX 2.3 document
// whose main package is the etcd-adapter module at version, with the binary's SHA-256, that
// lists every module the binary's build information names with its version and purl, and
// whose versions are go.mod's for the modules go.mod requires directly.
func checkSBOM(g Gomega, bin, sbom []byte, version string) {
	g.Expect(sbom).NotTo(BeEmpty(), "the image holds an SBOM at %s", SBOMPath)
	var doc spdxDocument
	g.Expect(json.Unmarshal(sbom, &doc)).To(Succeed())
	g.Expect(doc.SPDXVersion).To(Equal("SPDX-2.3"))
	g.Expect(doc.Packages).NotTo(BeEmpty())
	sum := sha256.Sum256(bin)
	g.Expect(doc.Packages[0].Name).To(Equal("github.com/etcd-adapter/etcd-adapter"))
	g.Expect(doc.Packages[0].VersionInfo).To(Equal(version))
	g.Expect(doc.Packages[0].Checksums).To(ConsistOf(spdxChecksum{Algorithm: "SHA256", ChecksumValue: hex.EncodeToString(sum[:])}))

	versions := map[string]string{}
	for _, p := range doc.Packages[1:] {
		versions[p.Name] = p.VersionInfo
		g.Expect(p.ExternalRefs).To(ConsistOf(spdxExternalRef{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
			ReferenceLocator: "pkg:golang/" + p.Name + "@" + p.VersionInfo}), p.Name)
	}
	info, err := buildinfo.Read(bytes.NewReader(bin))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Deps).NotTo(BeEmpty())
	for _, d := range info.Deps {
		want := d.Version
		switch {
		case d.Replace != nil && strings.HasPrefix(d.Replace.Path, "./"):
			want = version // a module of this repository, built from the same revision
		case d.Replace != nil:
			want = d.Replace.Version
		}
		g.Expect(versions).To(HaveKeyWithValue(d.Path, want))
	}
	g.Expect(doc.Relationships).To(HaveLen(len(info.Deps) + 1))

	// The modules go.mod requires directly and the binary links are listed at go.mod's version.
	b, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	g.Expect(err).NotTo(HaveOccurred())
	mod, err := modfile.Parse("go.mod", b, nil)
	g.Expect(err).NotTo(HaveOccurred())
	direct := 0
	local := map[string]bool{}
	for _, r := range mod.Replace {
		if strings.HasPrefix(r.New.Path, "./") {
			local[r.Old.Path] = true // a module of this repository: listed at the image's version
		}
	}
	for _, r := range mod.Require {
		if v, ok := versions[r.Mod.Path]; ok && !r.Indirect && !local[r.Mod.Path] {
			direct++
			g.Expect(v).To(Equal(r.Mod.Version), r.Mod.Path)
		}
	}
	g.Expect(versions).To(HaveKey("sigs.k8s.io/controller-runtime"))
	g.Expect(versions).To(HaveKey("go.etcd.io/etcd/client/v3"))
	g.Expect(direct).To(BeNumerically(">", 5))
}

func TestSBOM(t *testing.T) {
	created := time.Unix(1700000000, 0)
	info := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/etcd-adapter/etcd-adapter", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "sigs.k8s.io/controller-runtime", Version: "v0.24.1", Sum: "h1:x"},
			{Path: "example.com/forked", Version: "v1.0.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.0.1"}},
		},
	}
	tests := []struct {
		name        string
		version     string
		wantMain    string
		wantPackage map[string]string
	}{
		{"A release build names its version", "v0.1.0", "v0.1.0",
			map[string]string{"sigs.k8s.io/controller-runtime": "v0.24.1", "example.com/forked": "v1.0.1"}},
		{"A build without a version keeps the build information's", "", "(devel)",
			map[string]string{"sigs.k8s.io/controller-runtime": "v0.24.1", "example.com/forked": "v1.0.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			b, err := SBOM(info, tt.version, "abc", created)
			g.Expect(err).NotTo(HaveOccurred())
			var doc spdxDocument
			g.Expect(json.Unmarshal(b, &doc)).To(Succeed())
			g.Expect(doc.CreationInfo.Created).To(Equal("2023-11-14T22:13:20Z"))
			g.Expect(doc.Packages[0].VersionInfo).To(Equal(tt.wantMain))
			got := map[string]string{}
			for _, p := range doc.Packages[1:] {
				got[p.Name] = p.VersionInfo
			}
			g.Expect(got).To(Equal(tt.wantPackage))
			again, err := SBOM(info, tt.version, "abc", created)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(b), "the same build gives the same SBOM")
		})
	}
	t.Run("No main module is an error", func(t *testing.T) {
		g := NewWithT(t)
		_, err := SBOM(&debug.BuildInfo{}, "v0.1.0", "abc", created)
		g.Expect(err).To(MatchError(ContainSubstring("no main module")))
	})
}
