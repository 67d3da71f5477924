package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/test/env/docblock"
)

// repoRoot is the repository, from this package's directory.
var repoRoot = filepath.Join("..", "..")

// notRunYet lists the blocks no test runs yet, each with why: page, a string only that block
// has, and the reason. TestEveryShellBlockIsRun fails for an entry whose block a test runs, so
// that the list only shrinks.
var notRunYet = []struct{ page, contains, why string }{}

// TestEveryShellBlockIsRun finds every sh, bash, shell and console fenced block of
// README.md and docs/*.md (indented ones too) and every block the repository's tests select with
// docblock.ShellBlock (read from their source with go/ast, scanSelections), and fails naming
// each block no test selects and no entry of notRunYet names. A ```console block is never run
// (bash cannot run prompts and output), so it always fails: write ```sh. It fails too for a
// selection bash would not find as one block, and for a call whose page or key it cannot read.
func TestEveryShellBlockIsRun(t *testing.T) {
	g := NewWithT(t)
	sels, unread, err := scanSelections(repoRoot)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(unread).To(BeEmpty(), "every docblock.ShellBlock call's page and key can be read from its source")

	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	g.Expect(err).NotTo(HaveOccurred())
	pages = append([]string{filepath.Join(repoRoot, "README.md")}, pages...)

	blocks := map[string][]docblock.Block{}
	for _, path := range pages {
		doc, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		page := filepath.ToSlash(strings.TrimPrefix(path, repoRoot+string(filepath.Separator)))
		for _, b := range docblock.Blocks(string(doc)) {
			if commandLangs[b.Lang] {
				blocks[page] = append(blocks[page], b)
			}
		}
	}
	g.Expect(blocks).To(HaveKey("docs/operations.md"), "the pages' blocks are found")

	run, bad := selected(blocks, sels)
	g.Expect(bad).To(BeEmpty(), "every selection finds one shell block of its page")
	g.Expect(unrun(blocks, run)).To(BeEmpty(), "every command block of the docs is run by a test: select each with "+
		"docblock.ShellBlock(g, dir, \"<page>\", \"<string only it has>\") in a test that runs it, or name it in notRunYet with why")
}

// commandLangs are the fences of command blocks.
var commandLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// blockID names a block: its page and the line of its fence.
func blockID(page string, b docblock.Block) string { return fmt.Sprintf("%s:%d", page, b.Line) }

// selected returns the blocks the selections pick, and the selections that do not pick exactly
// one shell block (as docblock.ShellBlock would fail on them).
func selected(blocks map[string][]docblock.Block, sels []selection) (map[string]bool, []string) {
	run := map[string]bool{}
	var bad []string
	for _, s := range sels {
		var found []string
		for _, b := range blocks[s.page] {
			if b.Shell() && strings.Contains(b.Body, s.key) {
				found = append(found, blockID(s.page, b))
			}
		}
		if len(found) != 1 {
			bad = append(bad, fmt.Sprintf("%s: %s %q selects %d blocks %v", s.at, s.page, s.key, len(found), found))
			continue
		}
		run[found[0]] = true
	}
	return run, bad
}

// unrun returns each block no selection picks and notRunYet does not name, and each entry of
// notRunYet that names no block or a block a test runs.
func unrun(blocks map[string][]docblock.Block, run map[string]bool) []string {
	var out []string
	listed := map[string]bool{}
	for _, n := range notRunYet {
		var ids []string
		for _, b := range blocks[n.page] {
			if strings.Contains(b.Body, n.contains) {
				ids = append(ids, blockID(n.page, b))
			}
		}
		switch {
		case len(ids) != 1:
			out = append(out, fmt.Sprintf("notRunYet %s %q names %d blocks %v, not one", n.page, n.contains, len(ids), ids))
		case run[ids[0]]:
			out = append(out, fmt.Sprintf("notRunYet %s %q: a test runs %s now; take the entry out", n.page, n.contains, ids[0]))
		default:
			listed[ids[0]] = true
		}
	}
	for page, bs := range blocks {
		for _, b := range bs {
			if id := blockID(page, b); !run[id] && !listed[id] {
				first, _, _ := strings.Cut(strings.TrimSpace(b.Body), "\n")
				out = append(out, fmt.Sprintf("%s (```%s) no test runs: %s", id, b.Lang, first))
			}
		}
	}
	return out
}
