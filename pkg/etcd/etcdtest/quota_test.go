package etcdtest

import (
	"testing"

	. "github.com/onsi/gomega" //nolint:revive // gomega's DSL reads best dot-imported
)

func TestReportsQuota(t *testing.T) {
	for version, want := range map[string]bool{
		"":        true,
		"3.5.35":  false,
		"3.6.0":   true,
		"3.6.14":  true,
		"3.7.3":   true,
		"4.0.0":   true,
		"3.4.37":  false,
		"unknown": true,
	} {
		NewWithT(t).Expect(reportsQuota(version)).To(Equal(want), "etcd %q", version)
	}
}
