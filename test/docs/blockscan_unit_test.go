package docs_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// TestScanSelections reads small test files the ways tests select blocks, and refuses a key it
// cannot read rather than guess one.
func TestScanSelections(t *testing.T) {
	const header = "package x\n\nimport (\n\t\"path/filepath\"\n\n\tdb \"github.com/etcd-adapter/etcd-adapter/test/env/docblock\"\n)\n\n"
	for _, tc := range []struct {
		name, src string
		want      []selection
		unread    int
	}{{
		name: "literals",
		src:  `func a() { db.ShellBlock(nil, filepath.Join("..", "docs"), "p.md", "k") }`,
		want: []selection{{page: "docs/p.md", key: "k"}},
	}, {
		name: "constants, locals and a function that only returns",
		src: `const page = "p.md"
var docs = filepath.Join("..", "docs")
func img(v string) string { return "IMG=" + v }
func a() { key := img("v1") + "!"; db.ShellBlock(nil, docs, page, key) }`,
		want: []selection{{page: "docs/p.md", key: "IMG=v1!"}},
	}, {
		name: "a wrapper read at each call, with a table's rows",
		src: `func sb(page, key string) string { return db.ShellBlock(nil, "../docs", page, key) }
func a() {
	for _, tc := range []struct{ page, key string }{{page: "p.md", key: "one"}, {key: "two", page: "q.md"}} {
		sb(tc.page, tc.key)
	}
	sb("r.md", "three")
}`,
		want: []selection{{page: "docs/p.md", key: "one"}, {page: "docs/q.md", key: "two"}, {page: "docs/r.md", key: "three"}},
	}, {
		name:   "a key from elsewhere is not read",
		src:    `func a(k string) { db.ShellBlock(nil, "../docs", "p.md", k+os.Getenv("X")) }`,
		unread: 1,
	}, {
		name:   "a wrapper nobody calls",
		src:    `func sb(key string) string { return db.ShellBlock(nil, "../docs", "p.md", key) }`,
		unread: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			root := t.TempDir()
			g.Expect(os.MkdirAll(filepath.Join(root, "x"), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(root, "x", "x_test.go"), []byte(header+tc.src+"\n"), 0o644)).To(Succeed())
			sels, unread, err := scanSelections(root)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(unread).To(HaveLen(tc.unread), "%v", unread)
			var got []selection
			for _, s := range sels {
				g.Expect(s.at).To(HavePrefix("x/x_test.go:"))
				got = append(got, selection{page: s.page, key: s.key})
			}
			g.Expect(got).To(ConsistOf(tc.want))
		})
	}
}
