package doclinks

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Link is a link of a Markdown file: its target as written, and the line it is on.
type Link struct {
	Target string
	Line   int
}

// linkPattern matches an inline link or image, [text](target) or ![text](target), with an
// optional title after the target.
var linkPattern = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// codeSpan matches an inline code span, whose text is not Markdown.
var codeSpan = regexp.MustCompile("`+[^`]*`+")

// Links returns the inline links of a Markdown text, outside fenced code blocks and code spans.
func Links(text string) []Link {
	var links []Link
	for i, line := range proseLines(text) {
		if line == "" {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range linkPattern.FindAllStringSubmatch(line, -1) {
			links = append(links, Link{Target: m[1], Line: i + 1})
		}
	}
	return links
}

// Anchors returns the anchors GitHub gives the headings of a Markdown text (outside fenced code
// blocks): lower case, punctuation dropped, spaces as hyphens, and -1, -2, ... on repeats.
func Anchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		trimmed := strings.TrimLeft(line, "#")
		if len(trimmed) == len(line) || len(line)-len(trimmed) > 6 || !strings.HasPrefix(trimmed, " ") {
			continue
		}
		a := slug(trimmed)
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// slug is GitHub's anchor of one heading's text.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// proseLines returns the lines of a Markdown text with those of fenced code blocks (``` or ~~~)
// blanked, so that line numbers stay the file's.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, line := range lines {
		t := strings.TrimSpace(line)
		switch {
		case fence != "":
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
			}
			lines[i] = ""
		case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			fence = t[:3]
			lines[i] = ""
		}
	}
	return lines
}
