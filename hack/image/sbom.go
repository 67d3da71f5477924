package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
)

// SBOMPath is where the image holds the manager's software bill of materials: an SPDX 2.3 JSON
// document of the Go modules linked into the binary.
const SBOMPath = "/usr/share/doc/etcd-adapter/sbom.spdx.json"

// spdxDocument is the part of SPDX 2.3 (https://spdx.github.io/spdx-spec/v2.3/) the SBOM uses.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID           string            `json:"SPDXID"`
	Name             string            `json:"name"`
	VersionInfo      string            `json:"versionInfo"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

// binarySBOM reads the Go build information of the binary (what `go version -m` prints: the main
// module, every module linked in with its version and go.sum hash, the Go version) and returns
// it as an SPDX document. Nothing is fetched: a module's version and hash are the ones the build
// used. created stamps the document (SOURCE_DATE_EPOCH), so the same binary gives the same SBOM.
func binarySBOM(bin []byte, version string, created time.Time) ([]byte, error) {
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return nil, fmt.Errorf("failed to read the manager's Go build information: %w", err)
	}
	sum := sha256.Sum256(bin)
	return SBOM(info, version, hex.EncodeToString(sum[:]), created)
}

// SBOM is the SPDX document of a Go binary's build information: one package for the main module
// (at version, which the build information does not know for a local build) and one per
// dependency (a replaced one at its replacement's version), each with a pkg:golang purl, related to the main module by
// DEPENDS_ON. binarySHA256 names the document, so that each binary's SBOM has its own namespace.
func SBOM(info *debug.BuildInfo, version, binarySHA256 string, created time.Time) ([]byte, error) {
	if info.Main.Path == "" {
		return nil, fmt.Errorf("the build information names no main module")
	}
	mainVersion := version
	if mainVersion == "" {
		mainVersion = info.Main.Version
	}
	doc := spdxDocument{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              info.Main.Path,
		DocumentNamespace: defaultSource + "/spdx/" + binarySHA256,
		CreationInfo: spdxCreationInfo{
			Created:  created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: etcd-adapter hack/image", "Tool: " + info.GoVersion},
		},
	}
	mainPkg := modulePackage("SPDXRef-Package-main", info.Main.Path, mainVersion)
	mainPkg.Checksums = []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: binarySHA256}}
	doc.Packages = append(doc.Packages, mainPkg)
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", mainPkg.SPDXID})
	for i, dep := range info.Deps {
		p := modulePackage(fmt.Sprintf("SPDXRef-Package-%d", i+1), dep.Path, depVersion(dep, mainVersion))
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{mainPkg.SPDXID, "DEPENDS_ON", p.SPDXID})
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("failed to encode the SBOM: %w", err)
	}
	return append(out, '\n'), nil
}

// depVersion is the version the SBOM gives a dependency: its replacement's, if replaced; and the
// main module's for a module of this repository built from its directory (pkg/etcd, pkg/k3s are
// replaced by ./pkg/etcd, ./pkg/k3s: their build information says "(devel)"), since they are
// built from the same revision.
func depVersion(dep *debug.Module, mainVersion string) string {
	if dep.Replace == nil {
		return dep.Version
	}
	if strings.HasPrefix(dep.Replace.Path, "./") || strings.HasPrefix(dep.Replace.Path, "../") {
		return mainVersion
	}
	return dep.Replace.Version
}

// modulePackage is the SPDX package of one Go module, with its purl. The go.sum hash (h1:) is no
// checksum algorithm SPDX knows, so it is left out: the version identifies the module's content
// through the Go checksum database.
func modulePackage(id, path, version string) spdxPackage {
	p := spdxPackage{SPDXID: id, Name: path, VersionInfo: version, DownloadLocation: "NOASSERTION"}
	if version != "" && version != "(devel)" {
		p.ExternalRefs = []spdxExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
			ReferenceLocator: "pkg:golang/" + path + "@" + version}}
	}
	return p
}
