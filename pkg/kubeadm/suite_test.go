package kubeadm

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// mgmt is the management cluster (Cluster API's ClusterCache included) and workload the shared
// workload apiserver every non-isolated test cluster registers.
var (
	mgmt     *env.Management
	workload *env.APIServer
	// secretClient reads Secrets from the manager's cache, as KCP's SecretCachingClient does;
	// the backend reads the CA Secret on every call.
	secretClient client.Client
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	start := time.Now()
	var err error
	if workload, err = env.StartAPIServer(env.WorkloadAPIServerOptions()); err != nil {
		fmt.Fprintf(os.Stderr, "failed to start the workload apiserver: %v\n", err)
		return 1
	}
	defer stopOrReport("workload apiserver", workload.Stop)
	if mgmt, err = env.StartManagement(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "failed to start the management cluster: %v\n", err)
		return 1
	}
	defer stopOrReport("management cluster", mgmt.Stop)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if secretClient, err = newSecretCachingClient(ctx, mgmt); err != nil {
		fmt.Fprintf(os.Stderr, "failed to create the Secret caching client: %v\n", err)
		return 1
	}
	fmt.Printf("Test environment started in %s\n", time.Since(start).Round(time.Millisecond))
	return m.Run()
}

// newSecretCachingClient returns a client that reads Secrets of Clusters (cluster-name label)
// from an informer cache, as KCP's manager does for the etcd CA; Cluster API core's own manager
// cache drops the data of those Secrets, so it cannot serve them.
func newSecretCachingClient(ctx context.Context, m *env.Management) (client.Client, error) {
	req, err := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	c, err := cache.New(m.Config, cache.Options{
		Scheme:   env.Scheme(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: labels.NewSelector().Add(*req)}},
	})
	if err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("failed to sync the Secret cache")
	}
	return client.New(m.Config, client.Options{Scheme: env.Scheme(), Cache: &client.CacheOptions{Reader: c}})
}

func stopOrReport(what string, stop func() error) {
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "failed to stop %s: %v\n", what, err)
	}
}
