package etcd

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	. "github.com/onsi/gomega"
)

func TestSanitizeText(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{name: "a plain message is kept", in: "etcdserver: no leader", max: 64, want: "etcdserver: no leader"},
		{name: "a forged line becomes one space", in: "refused\n* Member m1: healthy", max: 64, want: "refused * Member m1: healthy"},
		{name: "escape sequences and tabs are stripped", in: "a\x1b[31m\tb\r\n", max: 64, want: "a [31m b"},
		{name: "bidirectional overrides are stripped", in: "safe\u202eevil", max: 64, want: "safe evil"},
		{name: "leading and trailing space go", in: "  \n x \n ", max: 64, want: "x"},
		{name: "invalid UTF-8 becomes the replacement character", in: "a\xffb", max: 64, want: "a\uFFFDb"},
		{name: "a long message is cut with an ellipsis", in: strings.Repeat("x", 100), max: 10, want: "xxxxxxx…"},
		{name: "a cut never splits a rune", in: strings.Repeat("é", 10), max: 8, want: "éé…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := SanitizeText(tt.in, tt.max)
			g.Expect(got).To(Equal(tt.want))
			g.Expect(len(got)).To(BeNumerically("<=", tt.max))
		})
	}
}

func TestSanitizeTexts(t *testing.T) {
	g := NewWithT(t)
	g.Expect(SanitizeTexts(nil, 2, 10)).To(BeNil())
	g.Expect(SanitizeTexts([]string{"a\nb", "c", "d", "e"}, 2, 10)).To(Equal([]string{"a b", "c", "and 2 more not shown"}))
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{name: "short enough", in: "a\nb", max: 3, want: "a\nb"},
		{name: "cut keeps line breaks", in: "* a\n* b\n* c", max: 8, want: "* a\n*…"},
		{name: "no room for the ellipsis", in: "abcdef", max: 2, want: "ab"},
		{name: "zero", in: "abc", max: 0, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Truncate(tt.in, tt.max)).To(Equal(tt.want))
		})
	}
}

// FuzzSanitizeText checks that whatever a workload cluster writes, the result is valid UTF-8
// without control or format characters, and within the bound.
func FuzzSanitizeText(f *testing.F) {
	f.Add("etcdserver: request timed out", 512)
	f.Add("a\x00b\x1b[2J\u202e\u2028\xff\xfe", 7)
	f.Add(strings.Repeat("é", 600), 512)
	f.Add("", 0)
	f.Fuzz(func(t *testing.T, s string, maxBytes int) {
		if maxBytes < 0 || maxBytes > 1<<16 {
			return
		}
		got := SanitizeText(s, maxBytes)
		if len(got) > maxBytes {
			t.Fatalf("SanitizeText(%q, %d) = %q: %d bytes", s, maxBytes, got, len(got))
		}
		if !utf8.ValidString(got) {
			t.Fatalf("SanitizeText(%q, %d) = %q: not valid UTF-8", s, maxBytes, got)
		}
		for _, r := range got {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || (unicode.IsSpace(r) && r != ' ') {
				t.Fatalf("SanitizeText(%q, %d) = %q: keeps %U", s, maxBytes, got, r)
			}
		}
	})
}
