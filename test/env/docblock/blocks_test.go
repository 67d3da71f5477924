package docblock

import (
	"testing"

	"github.com/onsi/gomega"
)

func Test_shellBlocks(t *testing.T) {
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
			g.Expect(shellBlocks(tt.doc)).To(gomega.Equal(tt.want))
		})
	}
}
