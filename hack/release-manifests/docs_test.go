package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/component-base/logs"

	"github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter/manager"
)

// backticked matches the `...` spans of a markdown table cell.
var backticked = regexp.MustCompile("`([^`]*)`")

// settingVariable matches a clusterctl variable named with its default in running text:
// `ETCD_ADAPTER_REPLICAS` (default `2`).
var settingVariable = regexp.MustCompile("`(ETCD_ADAPTER_[A-Z0-9_]+)`\\s+\\(default\\s+`([^`]*)`\\)")

// TestDocs_variables: docs/operations.md lists every clusterctl variable of the components, once,
// with its default, and nothing else: beside the flag it sets in the "Manager flags" table, and
// in "Settings kept across clusterctl upgrade" for a variable that sets no flag.
func TestDocs_variables(t *testing.T) {
	g := NewWithT(t)
	vars := variableDefaults(g)
	registered := manager.NewFlagSet(manager.NewOptions(), logs.NewOptions())
	documented, want := map[string]string{}, map[string]string{}
	for _, row := range tableRows(g, docSection(g, "## Manager flags")) {
		g.Expect(row).To(HaveLen(4), "flag | default | what it does | clusterctl variable: %q", row)
		name, flag := firstBackticked(row[3]), strings.TrimLeft(firstBackticked(row[0]), "-")
		if name == "" {
			continue
		}
		g.Expect(documented).NotTo(HaveKey(name), "%s is listed once", name)
		g.Expect(registered.Lookup(flag)).NotTo(BeNil(), "%s sets --%s, a flag of the manager", name, flag)
		documented[name] = documentedDefault(g, flag, row[1])
		if def := vars[name]; def != nil {
			// The flag's default and the variable's are one value, as the flag parses it.
			want[name] = flagValue(g, flag, *def)
		}
	}
	settings := docSection(g, "## Settings kept across clusterctl upgrade")
	for _, m := range settingVariable.FindAllStringSubmatch(settings, -1) {
		g.Expect(documented).NotTo(HaveKey(m[1]), "%s is listed once", m[1])
		documented[m[1]] = m[2]
		if def := vars[m[1]]; def != nil {
			want[m[1]] = *def
		}
	}
	for name, def := range vars {
		g.Expect(def).NotTo(BeNil(), name)
		if _, ok := want[name]; !ok {
			want[name] = *def
		}
	}
	g.Expect(documented).To(Equal(want))
}

// TestDocs_flagTable: docs/operations.md "Manager flags" has one row per flag the manager
// registers (manager.NewFlagSet) and none for a flag it does not; each row's default is the
// flag's, and its clusterctl variable is the one the components set the flag with.
func TestDocs_flagTable(t *testing.T) {
	g := NewWithT(t)
	rows := tableRows(g, docSection(g, "## Manager flags"))
	registered := manager.NewFlagSet(manager.NewOptions(), logs.NewOptions())
	byVariable := flagVariables(g)

	documented := map[string]bool{}
	for _, row := range rows {
		g.Expect(row).To(HaveLen(4), "flag | default | what it does | clusterctl variable: %q", row)
		name := strings.TrimLeft(firstBackticked(row[0]), "-")
		g.Expect(documented).NotTo(HaveKey(name), "--%s has one row", name)
		documented[name] = true
		f := registered.Lookup(name)
		if f == nil {
			// Checked as a whole below, with the names of the flags.
			continue
		}
		g.Expect(documentedDefault(g, name, row[1])).To(Equal(f.DefValue), "the default of --%s", name)
		g.Expect(firstBackticked(row[3])).To(Equal(byVariable[name]), "the clusterctl variable of --%s", name)
	}
	var names []string
	registered.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	g.Expect(sortedKeys(documented)).To(ConsistOf(names))
}

// documentedDefault returns the default a table cell gives, in the flag's own spelling (what
// pflag shows, e.g. 10m0s for 10m): its first `value`, or the empty value when the cell starts
// with "empty".
func documentedDefault(g Gomega, name, cell string) string {
	if strings.HasPrefix(cell, "empty") {
		fresh := manager.NewFlagSet(manager.NewOptions(), logs.NewOptions()).Lookup(name)
		if strings.HasSuffix(fresh.Value.Type(), "Slice") {
			return "[]"
		}
		return ""
	}
	v := firstBackticked(cell)
	g.Expect(v).NotTo(BeEmpty(), "the default of --%s is `value` or empty: %q", name, cell)
	return flagValue(g, name, v)
}

// flagValue returns v as flag name parses and shows it; a YAML double-quoted v (a variable's
// default such as "") is unquoted first.
func flagValue(g Gomega, name, v string) string {
	if len(v) >= 2 && strings.HasPrefix(v, `"`) && strings.HasSuffix(v, `"`) {
		unquoted, err := strconv.Unquote(v)
		g.Expect(err).NotTo(HaveOccurred(), "the value %s for --%s", v, name)
		v = unquoted
	}
	fresh := manager.NewFlagSet(manager.NewOptions(), logs.NewOptions()).Lookup(name)
	g.Expect(fresh.Value.Set(v)).To(Succeed(), "the value of --%s, %q", name, v)
	return fresh.Value.String()
}

// flagVariables maps each flag the components' Deployment sets through a clusterctl variable to
// that variable: --flag=${VAR:=default}, or --flag followed by ${VAR:=default}.
func flagVariables(g Gomega) map[string]string {
	raw, err := Build(filepath.Join("..", "..", "config", "default"), defaultImage)
	g.Expect(err).NotTo(HaveOccurred())
	var args []string
	for _, o := range decodeObjects(g, raw) {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			a, _ := c.(map[string]any)["args"].([]any)
			for _, s := range a {
				args = append(args, s.(string))
			}
		}
	}
	g.Expect(args).NotTo(BeEmpty())
	variable := regexp.MustCompile(`^\$\{([A-Z0-9_]+):=.*\}$`)
	out := map[string]string{}
	for i, a := range args {
		flag, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			value = args[i+1]
		}
		if m := variable.FindStringSubmatch(value); m != nil {
			out[flag] = m[1]
		}
	}
	return out
}

// docSection returns the text of docs/operations.md from the heading to the next heading.
func docSection(g Gomega, heading string) string {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	g.Expect(err).NotTo(HaveOccurred())
	_, after, found := strings.Cut(string(doc), "\n"+heading+"\n")
	g.Expect(found).To(BeTrue(), "docs/operations.md has a section %q", heading)
	if i := strings.Index(after, "\n#"); i >= 0 {
		after = after[:i]
	}
	return after
}

// tableRows returns the cells of the body rows of the markdown tables in text.
func tableRows(g Gomega, text string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		g.Expect(cells).NotTo(BeEmpty())
		rows = append(rows, cells)
	}
	return rows
}

// firstBackticked returns the first `...` span of cell, or "".
func firstBackticked(cell string) string {
	if m := backticked.FindStringSubmatch(cell); m != nil {
		return m[1]
	}
	return ""
}
