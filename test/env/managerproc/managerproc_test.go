package managerproc

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// TestProcess runs two manager processes under leader election against a real management
// apiserver: exactly one reports itself elected, and SIGKILL ends the leader without releasing
// its Lease (the holder stays until the other takes it over after the Lease expired).
func TestProcess(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mgmt, err := env.StartManagementWith(ctx, env.ManagementOptions{CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "config", "crd", "bases")}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = mgmt.Stop() })
	const ns, id = "etcd-adapter-system", "managerproc-test"
	g.Expect(mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	dir := t.TempDir()
	bin, err := Build(ctx, dir, mgmt.Config)
	g.Expect(err).NotTo(HaveOccurred())
	args := []string{"--leader-elect=true", "--leader-elect-id=" + id, "--leader-elect-namespace=" + ns,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}
	var procs []*Process
	for _, name := range []string{"a", "b"} {
		p, err := bin.Start(ctx, Options{Log: filepath.Join(dir, name+".log"), Args: args})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = p.Kill() })
		procs = append(procs, p)
	}
	var leader, other *Process
	g.Eventually(func() int {
		n := 0
		for _, p := range procs {
			if p.Elected(id) {
				leader, n = p, n+1
			} else {
				other = p
			}
		}
		return n
	}, time.Minute, 200*time.Millisecond).Should(Equal(1), "exactly one replica leads")
	lease := &coordinationv1.Lease{}
	g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, lease)).To(Succeed())
	holder := *lease.Spec.HolderIdentity

	g.Expect(leader.Kill()).To(Succeed())
	g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, lease)).To(Succeed())
	g.Expect(*lease.Spec.HolderIdentity).To(Equal(holder), "a SIGKILLed leader releases nothing")
	g.Eventually(func() bool { return other.Elected(id) }, time.Minute, 200*time.Millisecond).Should(BeTrue(), "the other replica takes over once the Lease expired")
	g.Expect(other.Stop()).To(Succeed())
}
