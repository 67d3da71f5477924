package doclinks

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// root is the repository, from this package's directory.
var root = filepath.Join("..", "..")

// TestDocs_relativeLinksResolve follows every relative link of README.md and docs/*.md: the file
// or directory it names exists, and an anchor it names is a heading of that Markdown file.
func TestDocs_relativeLinksResolve(t *testing.T) {
	g := NewWithT(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	g.Expect(err).NotTo(HaveOccurred())
	files := append([]string{filepath.Join(root, "README.md")}, docs...)
	g.Expect(len(files)).To(BeNumerically(">", 5), "the docs are found")

	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		anchors[path] = Anchors(string(data))
		return anchors[path]
	}

	var broken []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		g.Expect(err).NotTo(HaveOccurred())
		for _, l := range Links(string(data)) {
			if why := check(file, l.Target, anchorsOf); why != "" {
				rel, _ := filepath.Rel(root, file)
				broken = append(broken, fmt.Sprintf("%s:%d: %s: %s", rel, l.Line, l.Target, why))
			}
		}
	}
	g.Expect(broken).To(BeEmpty(), "every relative link resolves")
}

// check says why a link of file does not resolve, or "".
func check(file, target string, anchorsOf func(string) map[string]bool) string {
	u, err := url.Parse(target)
	if err != nil {
		return err.Error()
	}
	if u.Scheme != "" || strings.HasPrefix(target, "//") {
		return "" // not relative
	}
	path := file
	if u.Path != "" {
		path = filepath.Join(filepath.Dir(file), filepath.FromSlash(u.Path))
		if _, err := os.Stat(path); err != nil {
			return "no such file"
		}
	}
	if u.Fragment == "" || !strings.HasSuffix(path, ".md") {
		return ""
	}
	if !anchorsOf(path)[u.Fragment] {
		return "no heading with this anchor"
	}
	return ""
}

// Test_check: the checker itself finds a missing file and a missing anchor, and passes what
// resolves, on files of its own.
func Test_check(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	doc := write("a.md", "# Title\n\n## `removed-node-name` is K3s's claim, not proof\n\n## 1,000 Clusters\n\n## Steps\n\n## Steps\n\n```sh\n# not a heading\n```\n")
	write("b.md", "# B\n")
	anchorsOf := func(p string) map[string]bool {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return Anchors(string(data))
	}
	for _, tt := range []struct {
		target, want string
	}{
		{"b.md", ""},
		{"b.md#b", ""},
		{"#removed-node-name-is-k3ss-claim-not-proof", ""},
		{"#1000-clusters", ""},
		{"#steps-1", ""},
		{"https://example.com/x.md#nothing", ""},
		{"c.md", "no such file"},
		{"b.md#nothing", "no heading with this anchor"},
		{"#not-a-heading", "no heading with this anchor"},
		{"#steps-2", "no heading with this anchor"},
	} {
		t.Run(tt.target, func(t *testing.T) {
			NewWithT(t).Expect(check(doc, tt.target, anchorsOf)).To(Equal(tt.want))
		})
	}
}

// TestLinks: links in prose are found with their line; those in code blocks and code spans are
// not links.
func TestLinks(t *testing.T) {
	g := NewWithT(t)
	text := "see [a](a.md#x) and ![img](i.png \"t\")\n`[no](code.md)`\n```\n[no](fenced.md)\n```\n[b](<b.md>)\n"
	g.Expect(Links(text)).To(Equal([]Link{{"a.md#x", 1}, {"i.png", 1}, {"b.md", 6}}))
}
