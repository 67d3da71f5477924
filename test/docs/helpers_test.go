package docs_test

import (
	"path/filepath"
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

// steps splits a block into its numbered steps (docblock.Steps).
func steps(g Gomega, block string) map[string]string {
	return docblock.Steps(g, block)
}

// fill replaces the placeholders of a block (<ns>, <machine>) with the names of this test's objects.
func fill(block string, values map[string]string) string {
	for k, v := range values {
		block = strings.ReplaceAll(block, k, v)
	}
	return block
}
