package external

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	grpccreds "google.golang.org/grpc/credentials"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
)

// The hostile tests play a workload cluster whose admins hold its etcd CA key: they can serve
// a valid certificate and answer anything. Each shows the bound holds for that Cluster, the
// manager's heap stays flat, and another Cluster's observation still succeeds.

// hostileEtcd is a gRPC server with a certificate the etcd CA signed, answering MemberList with
// members and Status as the only member.
type hostileEtcd struct {
	pb.UnimplementedClusterServer
	pb.UnimplementedMaintenanceServer
	members []*pb.Member
	url     string
}

func (h *hostileEtcd) header() *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: 0xc1, MemberId: h.members[0].ID, RaftTerm: 2}
}

func (h *hostileEtcd) MemberList(context.Context, *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	return &pb.MemberListResponse{Header: h.header(), Members: h.members}, nil
}

func (h *hostileEtcd) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	return &pb.StatusResponse{Header: h.header(), Version: "3.6.0", Leader: h.members[0].ID, RaftTerm: 2}, nil
}

// startHostileEtcd serves members with a server certificate of ca; the first member's client URL
// is the server's own.
func startHostileEtcd(t *testing.T, ca *pki.CA, members func(url string) []*pb.Member) *hostileEtcd {
	t.Helper()
	g := NewWithT(t)
	kp, err := ca.NewServerCert("hostile")
	g.Expect(err).NotTo(HaveOccurred())
	cert, err := kp.TLSCertificate()
	g.Expect(err).NotTo(HaveOccurred())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	h := &hostileEtcd{url: "https://" + l.Addr().String()}
	h.members = members(h.url)
	// The server sends what it likes: its own send limit is lifted.
	s := grpc.NewServer(grpc.Creds(grpccreds.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.CertPool()})),
		grpc.MaxSendMsgSize(1<<31-1))
	pb.RegisterClusterServer(s, h)
	pb.RegisterMaintenanceServer(s, h)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return h
}

// manyMembers returns n members with names of nameBytes bytes, each with a client URL on a
// closed port, after one member at url.
func manyMembers(t *testing.T, n, nameBytes int) func(url string) []*pb.Member {
	closed := closedEndpoint(t)
	return func(url string) []*pb.Member {
		out := []*pb.Member{{ID: 1, Name: "hostile", ClientURLs: []string{url}, PeerURLs: []string{"https://127.0.0.1:2380"}}}
		for i := 2; i <= n; i++ {
			out = append(out, &pb.Member{ID: uint64(i), Name: fmt.Sprintf("%0*d", nameBytes, i), ClientURLs: []string{fmt.Sprintf("%s/%d", closed, i)}})
		}
		return out
	}
}

// heapInuse is the heap in use after a collection, in bytes.
func heapInuse() uint64 {
	// Twice: buffers gRPC pooled (sync.Pool) are dropped on the second collection.
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func TestHostileMemberList(t *testing.T) {
	ctx := testContext(t)
	other := startExternal(t, mgmt, 1)
	tests := []struct {
		name      string
		members   int
		nameBytes int
	}{
		// About 20 MiB in one gRPC message: 20 times etcd.MaxResponseBytes, read no further. (The
		// server marshals and encrypts the whole message before its first byte leaves; at 100 MiB
		// that took longer than the 5 s call timeout on a loaded machine, so the call ended as a
		// timeout before the size was seen.)
		{name: "a member list of 20 MiB is too large and not read", members: 20_000, nameBytes: 1000},
		// Under 1 MiB, but 20 times more members than MaxMembers, each with a client URL to dial.
		{name: "a member list of thousands of small members is too large and none is dialled", members: 20 * etcd.MaxMembers, nameBytes: 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			hostile := startExternal(t, mgmt, 1)
			h := startHostileEtcd(t, hostile.etcd.CA(), manyMembers(t, tt.members, tt.nameBytes))
			b := hostile.backend(t, func(c *Config) { c.Endpoints = []string{h.url} })
			good := other.backend(t)

			before := heapInuse()
			for range 3 {
				_, err := b.Observe(ctx)
				g.Expect(err).To(MatchError(etcd.ErrTooLarge))
				v := etcd.AssessHealth(etcd.HealthInput{ObserveErr: err, Now: time.Now()})
				g.Expect(v.Cluster.Reason).To(Equal(v1alpha1.EtcdClusterInputTooLargeReason), v.Cluster.Message)

				snap, err := good.Observe(ctx)
				g.Expect(err).NotTo(HaveOccurred(), "another Cluster's observation fails")
				g.Expect(snap.Members).To(HaveLen(1))
			}
			after := heapInuse()
			grown := int64(after) - int64(before)
			t.Logf("heap in use: %d MiB before, %d MiB after three observations (%+d KiB)", before>>20, after>>20, grown>>10)
			g.Expect(grown).To(BeNumerically("<", 16<<20), "the manager's heap grew by %d MiB", grown>>20)
			runtime.KeepAlive(b)
		})
	}
}

func TestDialErrorClasses(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	e := startExternal(t, mgmt, 1)
	refused := closedEndpoint(t)
	// A TLS server with a certificate of another CA: a service of the management network that
	// is not this Cluster's etcd.
	foreign, err := pki.NewCA()
	g.Expect(err).NotTo(HaveOccurred())
	kp, err := foreign.NewServerCert("other")
	g.Expect(err).NotTo(HaveOccurred())
	cert, err := kp.TLSCertificate()
	g.Expect(err).NotTo(HaveOccurred())
	tl, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = tl.Close() })
	go acceptAndHandshake(tl)
	tlsFailed := "https://" + tl.Addr().String()
	// A listener that accepts and never answers: a filtered port.
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = sl.Close() })
	go acceptAndHold(sl)
	silent := "https://" + sl.Addr().String()

	b := e.backend(t, func(c *Config) {
		c.Endpoints = append(c.Endpoints, refused, tlsFailed, silent)
		c.CallTimeout = 2 * time.Second
	})
	snap, err := b.Observe(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	want := map[string]string{refused: classRefused, tlsFailed: classTLSFailed, silent: classUnreachable}
	for ep, class := range want {
		ev, ok := evidenceNaming(snap, ep)
		g.Expect(ok).To(BeTrue(), "no evidence names %s: %+v", ep, snap.Evidence)
		g.Expect(ev.Error).To(Equal(fmt.Sprintf("etcd at %s: %s", ep, class)), "a tenant reads the class, not the dial error")
	}
	v := etcd.AssessHealth(etcd.HealthInput{Snapshot: snap, Machines: machinesOf(e.nodes), Now: time.Now(), MembersOffMachines: true})
	for _, leak := range []string{"dial tcp", "connect:", "x509", "tls:", "certificate", "deadline"} {
		g.Expect(v.Cluster.Message).NotTo(ContainSubstring(leak))
	}

	t.Run("no endpoint answering says the classes only", func(t *testing.T) {
		g := NewWithT(t)
		b := e.backend(t, func(c *Config) { c.Endpoints = []string{refused, tlsFailed}; c.CallTimeout = 2 * time.Second })
		_, err := b.Observe(ctx)
		g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "want ErrUnreachable, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring(classRefused))
		g.Expect(err.Error()).To(ContainSubstring(classTLSFailed))
		for _, leak := range []string{"dial tcp", "connect:", "x509", "tls:", "certificate"} {
			g.Expect(err.Error()).NotTo(ContainSubstring(leak))
		}
		v := etcd.AssessHealth(etcd.HealthInput{ObserveErr: err, Now: time.Now()})
		g.Expect(v.Cluster.Status).To(Equal(metav1.ConditionUnknown))
	})
}

func evidenceNaming(snap *etcd.Snapshot, ep string) (etcd.MemberEvidence, bool) {
	for _, ev := range snap.Evidence {
		if strings.Contains(ev.Error, ep) {
			return ev, true
		}
	}
	return etcd.MemberEvidence{}, false
}

func acceptAndHandshake(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}()
	}
}

// acceptAndHold keeps every connection open, unanswered, until the listener is closed.
func acceptAndHold(l net.Listener) {
	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		held = append(held, c)
	}
}
