package main

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

var (
	rulesPath = filepath.Join("..", "..", "config", "prometheus", "rules", "etcd-adapter.rules.yaml")
	alertPath = filepath.Join("..", "..", "config", "prometheus", "alerts.yaml")
)

// TestAlertsUpToDate: the committed PrometheusRule is what the generator writes from the rule
// file, and its spec.groups decode to the same rules as the file's groups.
func TestAlertsUpToDate(t *testing.T) {
	g := NewWithT(t)
	rules, err := os.ReadFile(rulesPath)
	g.Expect(err).NotTo(HaveOccurred())
	committed, err := os.ReadFile(alertPath)
	g.Expect(err).NotTo(HaveOccurred())
	want, err := Render(rules)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(committed)).To(Equal(string(want)), "config/prometheus/alerts.yaml is stale: run make generate-alerts")

	var file struct {
		Groups []any `json:"groups"`
	}
	var pr struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	g.Expect(yaml.UnmarshalStrict(rules, &file)).To(Succeed())
	g.Expect(yaml.Unmarshal(committed, &pr)).To(Succeed())
	g.Expect(pr.Kind).To(Equal("PrometheusRule"))
	g.Expect(pr.Spec.Groups).To(Equal(file.Groups))
}

func TestRenderRejectsBadInput(t *testing.T) {
	for name, in := range map[string]string{
		"not YAML":  "groups: [",
		"no groups": "# nothing\n",
		"unknown":   "groups: []\nrule_files: []\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Render([]byte(in))
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}
