// Command promql-metrics parses PromQL expressions with Prometheus's own parser
// (github.com/prometheus/prometheus/promql/parser) and prints, for each, the metric names its
// selectors name. It reads a JSON array of expressions on stdin and writes a JSON array of
// results in the same order; an expression that does not parse gets its error instead.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// result is what one expression names, or why it does not parse.
type result struct {
	Expr    string   `json:"expr"`
	Error   string   `json:"error,omitempty"`
	Metrics []string `json:"metrics"`
	// Unnamed is true when a selector names no metric (only label matchers): such a query may
	// select anything, so a caller cannot check its names.
	Unnamed bool `json:"unnamed,omitempty"`
}

func main() {
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintf(os.Stderr, "failed to read a JSON array of expressions: %v\n", err)
		os.Exit(2)
	}
	out := make([]result, 0, len(exprs))
	for _, e := range exprs {
		out = append(out, names(e))
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "failed to write the results: %v\n", err)
		os.Exit(2)
	}
}

func names(e string) result {
	r := result{Expr: e, Metrics: []string{}}
	// Default options: the PromQL a Prometheus without feature flags accepts.
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(e)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	seen := map[string]bool{}
	for _, vs := range parser.ExtractSelectors(expr) {
		named := false
		for _, m := range vs {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				seen[m.Value] = true
				named = true
			}
		}
		if !named {
			r.Unnamed = true
		}
	}
	for n := range seen {
		r.Metrics = append(r.Metrics, n)
	}
	sort.Strings(r.Metrics)
	return r
}
