package parentdeath

import (
	"os"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
)

// TestParentPIDEnvVar_matchesWrapper keeps the variable in step with the wrapper that reads it:
// a mismatch would make every wrapper refuse to start kube-apiserver and etcd.
func TestParentPIDEnvVar_matchesWrapper(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("../../../hack/tools/parent-death/main.go")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(ContainSubstring("ParentPIDEnvVar = " + strconv.Quote(ParentPIDEnvVar)))
}

func TestExport(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(ParentPIDEnvVar, "1")
	g.Expect(Export()).To(Succeed())
	g.Expect(os.Getenv(ParentPIDEnvVar)).To(Equal(strconv.Itoa(os.Getpid())))
}
