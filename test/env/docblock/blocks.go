package docblock

import (
	"strings"
)

// Block is a fenced code block of a Markdown page.
type Block struct {
	// Lang is the fence's info string, up to its first space: sh, bash, yaml...
	Lang string
	// Line is the line of the opening fence, from 1.
	Line int
	// Body is the block's text, each line without the fence's indentation (as CommonMark takes
	// it off), each ending in a newline.
	Body string
}

// Shell reports whether bash can run the block as it is: ```sh, ```bash and ```shell blocks.
// A ```console block mixes prompts and output and is never run.
func (b Block) Shell() bool {
	return b.Lang == "sh" || b.Lang == "bash" || b.Lang == "shell"
}

// Blocks returns the fenced code blocks (``` or ~~~) of a Markdown text, indented ones (in a
// list item) too. An unclosed block runs to the end of the text, as CommonMark has it.
func Blocks(text string) []Block {
	var blocks []Block
	var open *Block
	indent, fence := "", ""
	// The newline that ends the text ends its last line; it opens no empty line after it.
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if open == nil {
			if f := fenceOf(trimmed); f != "" {
				lang, _, _ := strings.Cut(strings.TrimSpace(strings.TrimLeft(trimmed, f[:1])), " ")
				open = &Block{Lang: lang, Line: i + 1}
				indent, fence = line[:len(line)-len(trimmed)], f
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" ") == "" {
			blocks = append(blocks, *open)
			open = nil
			continue
		}
		open.Body += strings.TrimPrefix(line, indent) + "\n"
	}
	if open != nil {
		blocks = append(blocks, *open)
	}
	return blocks
}

// fenceOf returns the fence a line opens (``` or ~~~, as many as it has), or "".
func fenceOf(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		n := len(trimmed) - len(strings.TrimLeft(trimmed, c))
		if n >= 3 {
			return trimmed[:n]
		}
	}
	return ""
}
