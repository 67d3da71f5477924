package docblock

import (
	"testing"

	"github.com/onsi/gomega"
)

// TestBlocks finds fenced blocks at the margin and in a list item, the item's indentation taken
// off, with their language and line; a ~~~ block ends at ~~~ only, a ```` block at ```` only.
func TestBlocks(t *testing.T) {
	g := gomega.NewWithT(t)
	doc := "# Page\n\n```sh\nkubectl get pods\n```\n\n1. Step:\n\n   ```bash title\n   make x \\\n     Y=1\n   ```\n\n```yaml\na: b\n```\n~~~console\n$ x\n```\n~~~\n````sh\n```\n````\n"
	g.Expect(Blocks(doc)).To(gomega.Equal([]Block{
		{Lang: "sh", Line: 3, Body: "kubectl get pods\n"},
		{Lang: "bash", Line: 9, Body: "make x \\\n  Y=1\n"},
		{Lang: "yaml", Line: 14, Body: "a: b\n"},
		{Lang: "console", Line: 17, Body: "$ x\n```\n"},
		{Lang: "sh", Line: 21, Body: "```\n"},
	}))
	g.Expect(Block{Lang: "console"}.Shell()).To(gomega.BeFalse(), "a console block has prompts and output")
}

// TestBlocks_shell takes the shell blocks of pages as a reader copies them.
func TestBlocks_shell(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{{
		name: "A block at the start of a line is returned as the page gives it",
		doc:  "Run:\n\n```sh\nkubectl get pods\n  indented  # kept\n```\n",
		want: []string{"kubectl get pods\n  indented  # kept\n"},
	}, {
		name: "A block under a list item loses the fence's indentation, and only that",
		doc:  "- **One namespace.**\n\n  ```sh\n  cat <<EOF\n    x\n\n  EOF\n  ```\n\n  More text.\n",
		want: []string{"cat <<EOF\n  x\n\nEOF\n"},
	}, {
		name: "Blocks in other languages and inline fences are not shell blocks",
		doc:  "```yaml\nkind: Pod\n```\nsay ```sh``` inline\n```sh\necho a\n```\n```\nplain\n```\n   ```sh\n   echo b\n   ```\n",
		want: []string{"echo a\n", "echo b\n"},
	}, {
		name: "A block left open runs to the end of the page",
		doc:  "```sh\necho a\n",
		want: []string{"echo a\n"},
	}, {
		name: "A page without shell blocks has none",
		doc:  "# Title\n\ntext\n",
		want: nil,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			var got []string
			for _, b := range Blocks(tt.doc) {
				if b.Shell() {
					got = append(got, b.Body)
				}
			}
			g.Expect(got).To(gomega.Equal(tt.want))
		})
	}
}
