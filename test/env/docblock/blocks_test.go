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
