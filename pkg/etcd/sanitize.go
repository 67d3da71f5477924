package etcd

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ellipsis ends a string Truncate shortened.
const ellipsis = "…"

// SanitizeText makes a string from a workload cluster fit for a status message or an Event: each
// run of control and format characters (newlines, escape sequences, bidirectional overrides)
// becomes one space, invalid UTF-8 becomes U+FFFD, and the result is cut to at most maxBytes
// bytes (Truncate). The workload cluster's admins write these strings, so nothing of them may
// forge lines of a message or grow a status past what the API accepts.
func SanitizeText(s string, maxBytes int) string {
	var b strings.Builder
	b.Grow(min(len(s), maxBytes+len(ellipsis)))
	space := false
	for _, r := range strings.ToValidUTF8(s, string(utf8.RuneError)) {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
		if b.Len() > maxBytes {
			break // the rest would be cut anyway
		}
	}
	return Truncate(b.String(), maxBytes)
}

// SanitizeTexts applies SanitizeText to each string and keeps at most maxItems of them, saying
// how many more there were.
func SanitizeTexts(ss []string, maxItems, maxBytes int) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, 0, min(len(ss), maxItems+1))
	for i, s := range ss {
		if i == maxItems {
			out = append(out, fmt.Sprintf("and %d more not shown", len(ss)-maxItems))
			break
		}
		out = append(out, SanitizeText(s, maxBytes))
	}
	return out
}

// Truncate cuts s to at most maxBytes bytes, on a rune boundary, ending in "…" when it cut.
// Messages etcd-adapter writes itself keep their line breaks; only their length is bounded.
func Truncate(s string, maxBytes int) string {
	if len(s) <= maxBytes {
		return s
	}
	suffix := ellipsis
	if maxBytes < len(ellipsis) {
		suffix = ""
	}
	cut := max(maxBytes-len(suffix), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + suffix
}
