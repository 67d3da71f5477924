package hookbench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter/manager"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/inprocess"
)

// namespace holds the benchmark's Clusters.
const namespace = "hookbench"

// platform is the management side: an apiserver with Cluster API's controllers and the
// etcd-adapter manager (with its webhooks), as `clusterctl init` would leave it.
type platform struct {
	mgmt *env.Management
	c    client.WithWatch
}

// startPlatform starts the management cluster and the etcd-adapter manager; both stop with b.
func startPlatform(ctx context.Context, b *testing.B) *platform {
	b.Helper()
	root := filepath.Join("..", "..")
	mgmt, err := env.StartManagementWith(ctx, env.ManagementOptions{
		Scheme:            manager.Scheme(),
		CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases")},
		Webhooks:          &envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook", "manifests.yaml")}},
	})
	if err != nil {
		b.Fatalf("failed to start the management cluster: %v", err)
	}
	b.Cleanup(func() { _ = mgmt.Stop() })
	c, err := client.NewWithWatch(mgmt.Config, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	startManager(ctx, b, mgmt)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		b.Fatal(err)
	}
	return &platform{mgmt: mgmt, c: c}
}

// startManager runs the etcd-adapter manager as the binary does (manager.Run), serving the
// webhooks the management apiserver was configured with.
func startManager(ctx context.Context, b *testing.B, mgmt *env.Management) {
	b.Helper()
	stop := inprocess.StartManager(ctx, mgmt.Config, inprocess.ManagerOptions(mgmt), time.Minute)
	b.Cleanup(func() {
		if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
			b.Errorf("the etcd-adapter manager failed: %v", err)
		}
	})
}

// createMachine creates a control-plane Machine for the Node to come, as a control-plane
// provider does before the Node joins: the Machine is provisioning until Cluster API finds a
// Node with its providerID.
func (p *platform) createMachine(ctx context.Context, cluster *clusterv1.Cluster, node string) (*clusterv1.Machine, error) {
	return env.CreateControlPlaneMachine(ctx, p.c, env.MachineInput{Cluster: cluster, Name: cluster.Name + "-" + node, ProviderID: providerID(cluster, node)})
}

// bindNode gives the workload Node the Machine's providerID and waits until Cluster API bound
// them (status.nodeRef).
func (p *platform) bindNode(ctx context.Context, m *clusterv1.Machine, cluster *clusterv1.Cluster, wl client.Client, node string) error {
	n := &corev1.Node{}
	if err := wl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return fmt.Errorf("failed to get Node %s: %w", node, err)
	}
	before := n.DeepCopy()
	n.Spec.ProviderID = providerID(cluster, node)
	if err := wl.Patch(ctx, n, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to set the providerID of Node %s: %w", node, err)
	}
	return poll(ctx, time.Minute, "Machine "+m.Name+" bound to its Node", func() (bool, error) {
		if err := p.c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return false, err
		}
		return m.Status.NodeRef.Name == node, nil
	})
}

func providerID(cluster *clusterv1.Cluster, node string) string {
	return fmt.Sprintf("bench://%s/%s", cluster.Name, node)
}

// poll calls cond every 10 ms until it is true, it fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-t.C:
		}
	}
}
