package manager

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// TestReadyz_waitsForWorkloadConnections: a replica is not Ready while its ClusterCache has not
// yet tried to connect to a served Cluster (it would serve the quorum guard with nothing to
// observe), and it becomes Ready once the attempt ended, even when the attempt failed (a workload
// cluster that is down must not keep a rolling update from completing).
//
// The Cluster's apiserver holds the manager's first request (its health probe) until the test
// lets it fail; requests of other clients (the management cluster's own Cluster API controllers)
// fail at once.
func TestReadyz_waitsForWorkloadConnections(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := createNamespace(ctx, g)

	held := make(chan *http.Request, 1)
	release := make(chan struct{})
	apiserver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.UserAgent(), " "+Name+" ") {
			select {
			case held <- r:
			default:
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	}))
	defer apiserver.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: apiserver.Certificate().Raw})
	cluster, err := env.RegisterCluster(ctx, mgmt.Client, env.ClusterInput{Namespace: ns, Name: "held", Workload: &rest.Config{
		Host: apiserver.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca},
	}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = mgmt.Client.Delete(context.Background(), cluster) })

	o, health, _ := testOptions(g)
	o.Webhooks = false
	startManager(ctx, t, o)

	var probe *http.Request
	select {
	case probe = <-held:
	case <-ctx.Done():
		t.Fatal("the manager's ClusterCache never tried to connect to the Cluster")
	}
	code, checks := readyz(g, health)
	g.Expect(probe.Context().Err()).NotTo(HaveOccurred(),
		"the connection attempt ended before /readyz was asked, so its answer says nothing about the attempt")
	g.Expect(code).To(Equal(http.StatusInternalServerError), "/readyz while the first connection attempt is under way:\n%s", checks)
	g.Expect(checks).To(ContainSubstring("[-]clustercache failed"))

	close(release)
	g.Eventually(func() (int, error) { return statusOf("http://" + health + "/readyz") }).
		WithTimeout(time.Minute).Should(Equal(http.StatusOK), "/readyz once the attempt failed")
}

func Test_connectionsTried(t *testing.T) {
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: "ns", Name: name} }
	many := func(n int) []clusterConnection {
		var out []clusterConnection
		for i := range n {
			out = append(out, clusterConnection{Cluster: key(fmt.Sprintf("c-%02d", i)), InfrastructureProvisioned: true})
		}
		return out
	}
	tests := []struct {
		name      string
		clusters  []clusterConnection
		expectErr string
	}{
		{name: "a manager that serves no Cluster is ready"},
		{
			name: "a Cluster the ClusterCache connected to or failed to connect to counts as tried",
			clusters: []clusterConnection{
				{Cluster: key("a"), InfrastructureProvisioned: true, Tried: true},
			},
		},
		{
			name: "a provisioned Cluster not tried yet keeps the replica unready and is named",
			clusters: []clusterConnection{
				{Cluster: key("a"), InfrastructureProvisioned: true, Tried: true},
				{Cluster: key("b"), InfrastructureProvisioned: true},
			},
			expectErr: "workload cluster connections not tried yet (1 of 2 Clusters): ns/b",
		},
		{
			name: "a Cluster whose infrastructure is not provisioned is not waited for, as the ClusterCache does not connect to it",
			clusters: []clusterConnection{
				{Cluster: key("a"), InfrastructureProvisioned: false},
			},
		},
		{
			name:      "many untried Clusters: the first five by name are named and the rest counted",
			clusters:  many(7),
			expectErr: "workload cluster connections not tried yet (7 of 7 Clusters): ns/c-00, ns/c-01, ns/c-02, ns/c-03, ns/c-04 and 2 more",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := connectionsTried(tt.clusters)
			if tt.expectErr != "" {
				g.Expect(err).To(MatchError(tt.expectErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}

// readyz returns /readyz's status code and its verbose list of checks.
func readyz(g Gomega, health string) (int, string) {
	resp, err := http.Get("http://" + health + "/readyz?verbose") //nolint:noctx // a local probe
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(b)
}
