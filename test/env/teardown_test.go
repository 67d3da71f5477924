package env

import (
	"os"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
)

// TestStop_leavesNothingBehind starts a management cluster and a workload apiserver, stops both,
// and checks that no child process and none of their listening ports remain, and that the test
// process itself listens on no more ports than before.
func TestStop_leavesNothingBehind(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	childrenBefore, err := childPIDs()
	g.Expect(err).NotTo(HaveOccurred())
	ownBefore, err := listeningPortsOf(os.Getpid())
	g.Expect(err).NotTo(HaveOccurred())

	mgmt, err := StartManagement(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	workload, err := StartAPIServer(APIServerOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	children, err := childPIDs()
	g.Expect(err).NotTo(HaveOccurred())
	started := newOnly(children, childrenBefore)
	// etcd and kube-apiserver for each of the two clusters.
	g.Expect(started).To(HaveLen(4))
	ports, err := listeningPortsOf(started...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(ports)).To(BeNumerically(">=", 4), "each etcd and apiserver listens")
	t.Logf("Environment processes %v listened on ports %v", started, ports)

	g.Expect(mgmt.Stop()).To(Succeed())
	g.Expect(workload.Stop()).To(Succeed())

	childrenAfter, err := childPIDs()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(newOnly(childrenAfter, childrenBefore)).To(BeEmpty(), "no child process may outlive Stop")
	listening, err := listeningPorts()
	g.Expect(err).NotTo(HaveOccurred())
	for _, port := range listening {
		g.Expect(ports).NotTo(ContainElement(port), "no port of the environment may still listen")
	}
	ownAfter, err := listeningPortsOf(os.Getpid())
	g.Expect(err).NotTo(HaveOccurred())
	slices.Sort(ownBefore)
	slices.Sort(ownAfter)
	g.Expect(slices.Equal(ownAfter, ownBefore)).To(BeTrue(), "the test process must not keep listeners: before %v, after %v", ownBefore, ownAfter)
}

// newOnly returns the elements of now that are not in before.
func newOnly(now, before []int) []int {
	var out []int
	for _, v := range now {
		if !slices.Contains(before, v) {
			out = append(out, v)
		}
	}
	return out
}
