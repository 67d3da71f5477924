package docs_test

import (
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/test/env/docblock"
)

// docsDir is the repository's docs directory, from this package's directory.
var docsDir = filepath.Join("..", "..", "docs")

// shellBlock returns the one ```sh block of docs/<page> that contains s, as the page gives it.
func shellBlock(g Gomega, page, s string) string {
	return docblock.ShellBlock(g, docsDir, page, s)
}

// stepStart matches the comment that opens a numbered step of a block: "# 3. Stop the manager".
var stepStart = regexp.MustCompile(`^# (\d+)\. `)

// steps splits a block whose steps are opened by "# N. " comments into the text of each step,
// keyed by N; a step runs to the next one.
func steps(g Gomega, block string) map[string]string {
	out := map[string]string{}
	current := ""
	for _, line := range strings.Split(block, "\n") {
		if m := stepStart.FindStringSubmatch(line); m != nil {
			current = m[1]
		}
		g.Expect(current).NotTo(BeEmpty(), "the block opens with a numbered step: %q", line)
		out[current] += line + "\n"
	}
	return out
}

// fill replaces the placeholders of a block (<ns>, <machine>) with the names of this test's objects.
func fill(block string, values map[string]string) string {
	for k, v := range values {
		block = strings.ReplaceAll(block, k, v)
	}
	return block
}
