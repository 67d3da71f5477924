package v1alpha1

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/yaml"
)

// TestSamples_machineHealthChecks: every MachineHealthCheck of
// config/samples/machinehealthcheck-etcd-member.yaml decodes strictly as Cluster API's type and
// remediates on MemberHealthyMachineCondition False only, never Unknown, with a selector whose
// placeholders are valid label values.
func TestSamples_machineHealthChecks(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "machinehealthcheck-etcd-member.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	docs := bytes.Split(raw, []byte("\n---\n"))
	g.Expect(docs).To(HaveLen(2))
	for _, doc := range docs {
		mhc := &clusterv1.MachineHealthCheck{}
		g.Expect(yaml.UnmarshalStrict(doc, mhc)).To(Succeed())
		g.Expect(mhc.Kind).To(Equal("MachineHealthCheck"))
		// Cluster API's MachineHealthCheck webhook refuses a selector that does not parse
		// (core/webhooks/admission/machinehealthcheck.go, cluster-api v1.14.2); the CRD alone,
		// which TestSamples_validate dry-runs against, does not check label values.
		_, err := metav1.LabelSelectorAsSelector(&mhc.Spec.Selector)
		g.Expect(err).NotTo(HaveOccurred(), "%s: the selector is one Cluster API accepts", mhc.Name)
		g.Expect(mhc.Spec.Checks.UnhealthyMachineConditions).To(ConsistOf(And(
			HaveField("Type", MemberHealthyMachineCondition), HaveField("Status", metav1.ConditionFalse))), mhc.Name)
	}
}
