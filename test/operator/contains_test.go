package operator

import (
	"fmt"
	"reflect"
	"testing"

	. "github.com/onsi/gomega"
)

// contains reports where got lacks what want holds: every key of a map in want must be in got
// with a value that contains want's, a list must have as many elements as want's, each
// containing want's element at its index, numbers must be equal in value (int64 or float64 by
// how they were decoded), and any other value must be equal. Fields the apiserver or a
// controller adds (defaults, owner references, status) are extra keys in got and pass; nil in
// want asks for nothing. It returns nil when got contains want.
func contains(want, got any, path string) error {
	switch w := want.(type) {
	case nil:
		return nil
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %T", path, got)
		}
		for k, wv := range w {
			if wv == nil {
				continue
			}
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s.%s: missing", path, k)
			}
			if err := contains(wv, gv, path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Errorf("%s: want a list, got %T", path, got)
		}
		if len(g) != len(w) {
			return fmt.Errorf("%s: want %d elements, got %d", path, len(w), len(g))
		}
		for i := range w {
			if err := contains(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	default:
		// A number is int64 or float64 by how the YAML or JSON it came from was decoded.
		if wn, ok := number(want); ok {
			if gn, ok := number(got); ok && wn == gn {
				return nil
			}
		}
		if !reflect.DeepEqual(want, got) {
			return fmt.Errorf("%s: want %v (%T), got %v (%T)", path, want, want, got, got)
		}
		return nil
	}
}

// number returns v as a float64 when it is a number of unstructured content.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func TestContains(t *testing.T) {
	tests := []struct {
		name      string
		want, got any
		wantErr   string
	}{
		{name: "equal scalars", want: "a", got: "a"},
		{name: "different scalars", want: "a", got: "b", wantErr: "x: want a (string), got b (string)"},
		{name: "one number decoded as int64 and float64", want: float64(256), got: int64(256)},
		{name: "different numbers", want: int64(1), got: float64(2), wantErr: "x: want 1 (int64), got 2 (float64)"},
		{name: "number and string", want: int64(1), got: "1", wantErr: "x: want 1 (int64), got 1 (string)"},
		{name: "extra keys in got", want: map[string]any{"a": "1"}, got: map[string]any{"a": "1", "b": "2"}},
		{name: "missing key", want: map[string]any{"a": "1", "c": "3"}, got: map[string]any{"a": "1"}, wantErr: "x.c: missing"},
		{name: "nil in want", want: map[string]any{"a": nil}, got: map[string]any{}},
		{name: "nested difference", want: map[string]any{"a": map[string]any{"b": "1"}}, got: map[string]any{"a": map[string]any{"b": "2"}}, wantErr: "x.a.b: want 1"},
		{name: "list elements contain", want: []any{map[string]any{"a": "1"}}, got: []any{map[string]any{"a": "1", "d": "4"}}},
		{name: "list of another length", want: []any{"a"}, got: []any{"a", "b"}, wantErr: "x: want 1 elements, got 2"},
		{name: "list element differs", want: []any{"a", "b"}, got: []any{"a", "c"}, wantErr: "x[1]: want b"},
		{name: "object where a list is wanted", want: []any{"a"}, got: map[string]any{}, wantErr: "x: want a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := contains(tt.want, tt.got, "x")
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}
