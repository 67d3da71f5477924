package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

var rulesDir = filepath.Join(repoRoot, "config", "prometheus", "rules")

// TestRulesPromtool checks the rule file and runs its unit tests with promtool: each alert fires
// on the series of its case and stays quiet on those of the cases that must not page.
func TestRulesPromtool(t *testing.T) {
	g := NewWithT(t)
	promtool := filepath.Join(toolsDir(t), "promtool")
	for _, args := range [][]string{
		{"check", "rules", "etcd-adapter.rules.yaml"},
		{"test", "rules", "etcd-adapter.rules.test.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "promtool %v:\n%s", args, out)
		g.Expect(string(out)).To(ContainSubstring("SUCCESS"), "promtool %v:\n%s", args, out)
	}
}

// TestRulesEveryAlertTested: every alert of the rule file has a promtool case where it fires
// and one where it stays quiet, so a rule added without its cases fails here.
func TestRulesEveryAlertTested(t *testing.T) {
	g := NewWithT(t)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	var cases struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	b, err := os.ReadFile(filepath.Join(rulesDir, "etcd-adapter.rules.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal(b, &rules)).To(Succeed())
	b, err = os.ReadFile(filepath.Join(rulesDir, "etcd-adapter.rules.test.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal(b, &cases)).To(Succeed())

	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range cases.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	var alerts int
	for _, grp := range rules.Groups {
		for _, r := range grp.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			g.Expect(fires).To(HaveKey(r.Alert), "no promtool case where %s fires", r.Alert)
			g.Expect(quiet).To(HaveKey(r.Alert), "no promtool case where %s stays quiet", r.Alert)
		}
	}
	g.Expect(alerts).To(BeNumerically(">=", 8))
}
