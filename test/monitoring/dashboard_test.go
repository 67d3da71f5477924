package monitoring

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/controlplane/metrics"
)

// grafanaIntervals are Grafana's interval variables; a query holds them where PromQL wants a
// duration, so they are replaced by one before parsing. Other variables ($namespace, $cluster)
// sit inside label matcher strings, where PromQL takes them as they are.
var grafanaIntervals = regexp.MustCompile(`\$__(rate_interval|interval|range)\b`)

// labelValues is Grafana's label_values(selector, label) variable query.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_]+\)$`)

// promqlResult is what promql-metrics says of one expression.
type promqlResult struct {
	Expr    string   `json:"expr"`
	Error   string   `json:"error"`
	Metrics []string `json:"metrics"`
	Unnamed bool     `json:"unnamed"`
}

// TestDashboardQueries parses every query of the Grafana dashboard (panel targets and the
// variables' label_values selectors) with Prometheus's PromQL parser and checks that each names
// only metrics the manager registers.
func TestDashboardQueries(t *testing.T) {
	g := NewWithT(t)
	b, err := os.ReadFile(filepath.Join(repoRoot, "config", "grafana", "etcd-adapter.json"))
	g.Expect(err).NotTo(HaveOccurred())
	var dash map[string]any
	g.Expect(json.Unmarshal(b, &dash)).To(Succeed())
	exprs := dashboardQueries(g, dash)
	g.Expect(len(exprs)).To(BeNumerically(">=", 20))

	results := parse(t, exprs)
	g.Expect(results).To(HaveLen(len(exprs)))
	exported := map[string]bool{}
	for _, n := range metrics.SeriesNames() {
		exported[n] = true
	}
	var used []string
	for _, r := range results {
		g.Expect(r.Error).To(BeEmpty(), "query does not parse: %s", r.Expr)
		g.Expect(r.Unnamed).To(BeFalse(), "query selects series without a metric name: %s", r.Expr)
		g.Expect(r.Metrics).NotTo(BeEmpty(), "query names no metric: %s", r.Expr)
		for _, m := range r.Metrics {
			g.Expect(exported).To(HaveKey(m), "query names %s, which the manager does not export: %s", m, r.Expr)
			used = append(used, m)
		}
	}
	// The per-member metrics and the Machines' member condition are what the per-Cluster view is for.
	g.Expect(used).To(ContainElements(metrics.Namespace+"_member_db_size_bytes", metrics.Namespace+"_member_applied_index_lag",
		metrics.Namespace+"_member_last_observed_timestamp_seconds", metrics.Namespace+"_leader_changes_total",
		metrics.Namespace+"_machine_member_condition"))
}

// TestDashboardQueriesCatchErrors: the check fails on a query that does not parse and on one
// naming a metric the manager does not export, so TestDashboardQueries can fail.
func TestDashboardQueriesCatchErrors(t *testing.T) {
	g := NewWithT(t)
	results := parse(t, []string{`sum(rate(etcdadapter_member_db_size_bytes[5m])`, `etcdadapter_no_such_metric`, `{cluster="c"}`})
	g.Expect(results).To(HaveLen(3))
	g.Expect(results[0].Error).NotTo(BeEmpty())
	g.Expect(results[1].Metrics).To(Equal([]string{"etcdadapter_no_such_metric"}))
	g.Expect(metrics.SeriesNames()).NotTo(ContainElement("etcdadapter_no_such_metric"))
	g.Expect(results[2].Unnamed).To(BeTrue())
}

// dashboardQueries returns the dashboard's PromQL: every "expr" of a panel target (nested rows
// included) and the selector of every label_values variable, Grafana's intervals replaced.
func dashboardQueries(g Gomega, dash map[string]any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "expr" {
					out = append(out, grafanaIntervals.ReplaceAllString(s, "5m"))
					continue
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash["panels"])
	templating, _ := dash["templating"].(map[string]any)
	list, _ := templating["list"].([]any)
	for _, v := range list {
		variable, _ := v.(map[string]any)
		if variable["type"] != "query" {
			continue
		}
		q, _ := variable["query"].(map[string]any)
		s, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(strings.TrimSpace(s))
		g.Expect(m).NotTo(BeNil(), "variable %v: only label_values(selector, label) queries are checked", variable["name"])
		out = append(out, m[1])
	}
	return out
}

// parse runs promql-metrics, Prometheus's PromQL parser, over exprs.
func parse(t *testing.T, exprs []string) []promqlResult {
	t.Helper()
	g := NewWithT(t)
	in, err := json.Marshal(exprs)
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(filepath.Join(toolsDir(t), "promql-metrics"))
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	g.Expect(err).NotTo(HaveOccurred())
	var results []promqlResult
	g.Expect(json.Unmarshal(out, &results)).To(Succeed())
	return results
}
