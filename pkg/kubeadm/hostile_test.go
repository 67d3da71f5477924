package kubeadm

import (
	"context"
	"errors"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm/internal/portforward/portforwardtest"
)

// failWith is a cri-streaming portforward.PortForwarder that fails every stream with msg: the kubelet's own
// streaming code then writes the error on the port-forward's error stream (channel 1 of the
// WebSocket protocol), in one message. A workload cluster's admins run its kubelets and may
// write anything there.
type failWith string

func (f failWith) PortForward(_ context.Context, _, _ string, _ int32, stream io.ReadWriteCloser) error {
	defer func() { _ = stream.Close() }()
	return errors.New(string(f))
}

// heapInuse is the heap in use after a collection, in bytes.
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// Test_dialer_hugeErrorFrame: a kubelet that answers a port-forward with an 8 MiB error (past
// the transport's wsReadLimit, one WebSocket message; one SPDY data frame) costs the manager no
// memory, and what it said reaches the error bounded and on one line.
//
// The heap is the whole test process's, where the package's management environment (TestMain)
// keeps reconciling in the background: one reading can be inflated by that work (by tens of
// MiB). So the flow runs in up to heapRounds rounds, each with its own kubelet, closed before the
// reading, and the least growth counts: errors that keep the kubelet's 3 x 8 MiB grow the heap
// by 24 MiB in every round, background work seldom in all of them.
func Test_dialer_hugeErrorFrame(t *testing.T) {
	huge := "refused\n* Member n2: healthy " + strings.Repeat("x", 8<<20)
	for _, p := range portforwardtest.Protocols {
		t.Run(p.Name, func(t *testing.T) {
			g := NewWithT(t)
			creds, _, err := sourceFor([]client.Object{caSecretFor(g)}).get(t.Context(), time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			// The old unbounded read kept 3 x 8 MiB in the errors; the kubelet code of the server may
			// still hold one message while its connection closes.
			const limit = 12 << 20
			least := int64(math.MaxInt64)
			for round := range heapRounds {
				server, _ := portforwardtest.Server(t, failWith(huge), p.WebSocket)
				d := dialerTo(server.URL, 10*time.Second)
				before := heapInuse()
				var errs []error
				for range 3 {
					_, err = d.dial(t.Context(), "n1", creds)
					g.Expect(err).To(HaveOccurred())
					g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "%.600s", err)
					errs = append(errs, err)
				}
				server.Close()
				after := heapInuse()
				grown := int64(after) - int64(before)
				t.Logf("heap in use: %d MiB before, %d MiB after three port-forwards answered with an 8 MiB error (%+d KiB, round %d)", before>>20, after>>20, grown>>10, round+1)
				for _, err := range errs {
					g.Expect(len(err.Error())).To(BeNumerically("<", 2*etcd.MaxTextBytes), "the kubelet's text is bounded: %.600s", err)
					g.Expect(err.Error()).NotTo(ContainSubstring("\n* Member"), "the kubelet's text cannot forge a line")
				}
				runtime.KeepAlive(errs)
				if least = min(least, grown); least < limit {
					break
				}
			}
			g.Expect(least).To(BeNumerically("<", limit), "the manager's heap grew by at least %d MiB in each of %d rounds", least>>20, heapRounds)
		})
	}
}

// heapRounds is how many times Test_dialer_hugeErrorFrame measures at most.
const heapRounds = 3
