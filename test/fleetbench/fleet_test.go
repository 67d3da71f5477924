package fleetbench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// fleet is the Clusters of one backend registered so far, on their workload clusters.
type fleet struct {
	// mgmt is the management cluster the manager process watches.
	mgmt    *env.Management
	ns      string
	backend v1alpha1.Backend
	// share is how many Clusters each workload cluster serves (FLEET_SHARE, default 1).
	share int
	// workloads are the workload clusters started so far; Cluster i is on workloads[i/share].
	workloads []fleetCluster
	// n is the number of Clusters registered so far.
	n       int
	workers int
}

func (f *fleet) start(ctx context.Context, idx int) (fleetCluster, error) {
	if f.backend == v1alpha1.BackendKubeadm {
		k, err := workload.StartKubeadm(ctx, workload.KubeadmOptions{Members: 3, Heartbeat: 10 * time.Second})
		return fleetCluster{kubeadm: k}, err
	}
	// K3s ticks every 2 s and kubelets report every 10 s; slower than the tests' defaults, so 20
	// clusters leave the shared machine some CPU.
	k, err := workload.StartK3s(ctx, workload.K3sOptions{
		Members: 3, FirstIP: 10 + 3*idx, Tick: 2 * time.Second, Heartbeat: 10 * time.Second,
	})
	return fleetCluster{k3s: k}, err
}

// grow starts workload clusters and registers Clusters until there are n, a few at a time.
func (f *fleet) grow(ctx context.Context, n int) error {
	if err := f.startWorkloads(ctx, (n+f.share-1)/f.share); err != nil {
		return err
	}
	if err := f.registerUpTo(ctx, n); err != nil {
		return err
	}
	if err := f.waitObserved(ctx, healthy); err != nil {
		return fmt.Errorf("failed waiting for %d ControlPlaneEtcds to report 3 healthy members: %w", f.n, err)
	}
	return nil
}

// startWorkloads starts workload clusters until there are want.
func (f *fleet) startWorkloads(ctx context.Context, want int) error {
	const parallel = 2
	for len(f.workloads) < want {
		batch := min(parallel, want-len(f.workloads))
		started := make([]fleetCluster, batch)
		errs := make([]error, batch)
		var wg sync.WaitGroup
		for i := range batch {
			idx := len(f.workloads) + i
			wg.Go(func() {
				// A cluster that was not ready within the workload package's minute on a
				// saturated machine is started once more.
				for attempt := 0; attempt < 2; attempt++ {
					started[i], errs[i] = f.start(ctx, idx)
					if errs[i] == nil {
						break
					}
				}
			})
		}
		wg.Wait()
		for i, c := range started {
			if errs[i] != nil {
				return fmt.Errorf("failed to start %s workload cluster %d: %w", f.backend, len(f.workloads), errs[i])
			}
			f.workloads = append(f.workloads, c)
		}
	}
	return nil
}

// registerUpTo registers Clusters until there are n, several at a time.
func (f *fleet) registerUpTo(ctx context.Context, n int) error {
	sem := make(chan struct{}, 8)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := f.n; i < n; i++ {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = f.register(ctx, i)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	f.n = n
	return nil
}

func healthy(cpe *v1alpha1.ControlPlaneEtcd) bool {
	return cpe.Status.HealthyVoters != nil && *cpe.Status.HealthyVoters == 3
}

func (f *fleet) name(i int) string { return fmt.Sprintf("%s-%02d", f.backend, i) }

// index is the number of the Cluster named name (see name), or f.n for a name not of the fleet.
func (f *fleet) index(name string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(name, string(f.backend)+"-"))
	if err != nil || i < 0 {
		return f.n
	}
	return i
}

// register creates Cluster i, its Secrets and its ControlPlaneEtcd. Clusters that share a
// workload cluster each connect with a user of their own: with the same credentials client-go
// would share one transport between them, and the manager would hold fewer connections than for
// as many real clusters.
func (f *fleet) register(ctx context.Context, i int) error {
	name := f.name(i)
	w := f.workloads[i/f.share]
	cfg := w.apiServer().Config
	if f.share > 1 {
		var err error
		if cfg, err = w.apiServer().AddAdmin(name); err != nil {
			return err
		}
	}
	in := env.ClusterInput{Namespace: f.ns, Name: name, Workload: cfg}
	if k := w.kubeadm; k != nil {
		in.EtcdCACert, in.EtcdCAKey = k.Etcd.CA().CertPEM(), k.Etcd.CA().KeyPEM()
	}
	if _, err := env.RegisterCluster(ctx, f.mgmt.Client, in); err != nil {
		return err
	}
	return f.mgmt.Client.Create(ctx, &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: name, Backend: f.backend, Mode: v1alpha1.ModeObserve},
	})
}

// addWorkers creates worker Nodes in every cluster until each has n: Node objects with what a
// kubelet writes (labels, capacity, images, node info, conditions), and no kubelet behind them.
func (f *fleet) addWorkers(ctx context.Context, n int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(f.workloads))
	sem := make(chan struct{}, 4)
	for i, c := range f.workloads {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			for w := f.workers; w < n && errs[i] == nil; w++ {
				errs[i] = createWorker(ctx, c.apiServer().Client, fmt.Sprintf("worker-%04d", w))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("failed to create worker Nodes: %w", err)
	}
	f.workers = n
	return nil
}

func createWorker(ctx context.Context, c client.Client, name string) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"node.kubernetes.io/instance-type": "m5.xlarge", "topology.kubernetes.io/zone": "zone-a",
	}}}
	if err := c.Create(ctx, n); err != nil {
		return fmt.Errorf("failed to create Node %s: %w", name, err)
	}
	// A merge patch, not an update: the workload cluster's own controllers may have written the
	// Node since it was created.
	before := n.DeepCopy()
	images := make([]corev1.ContainerImage, 0, 10)
	for i := range 10 {
		images = append(images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("registry.example/app-%d@sha256:%064d", i, i), fmt.Sprintf("registry.example/app-%d:v1.%d", i, i)},
			SizeBytes: int64(i+1) << 24,
		})
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	now := metav1.Now()
	n.Status = corev1.NodeStatus{
		Capacity: res, Allocatable: res, Images: images,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.0.1"}, {Type: corev1.NodeHostName, Address: name}},
		NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.34.2", OSImage: "Ubuntu 24.04", ContainerRuntimeVersion: "containerd://2.1.0", Architecture: "amd64", OperatingSystem: "linux"},
		Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: now, LastTransitionTime: now},
		},
	}
	if err := c.Status().Patch(ctx, n, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to write the status of Node %s: %w", name, err)
	}
	return nil
}

// deleteAll deletes every Cluster and ControlPlaneEtcd of the fleet and waits until they are
// gone. The ClusterCache disconnects on a Cluster's deletion and the registry forgets it; the
// caller samples when the HTTP connections to the workload apiservers have closed.
func (f *fleet) deleteAll(ctx context.Context) error {
	for i := range f.n {
		key := client.ObjectKey{Namespace: f.ns, Name: f.name(i)}
		if err := client.IgnoreNotFound(f.mgmt.Client.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})); err != nil {
			return fmt.Errorf("failed to delete Cluster %s: %w", key, err)
		}
		if err := client.IgnoreNotFound(f.mgmt.Client.Delete(ctx, &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})); err != nil {
			return fmt.Errorf("failed to delete ControlPlaneEtcd %s: %w", key, err)
		}
		// The test environment runs no garbage collector, which would delete the Cluster's
		// Secrets with it; the manager caches them.
		for _, suffix := range []string{"-kubeconfig", "-etcd"} {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name + suffix}}
			if err := client.IgnoreNotFound(f.mgmt.Client.Delete(ctx, secret)); err != nil {
				return fmt.Errorf("failed to delete Secret %s: %w", client.ObjectKeyFromObject(secret), err)
			}
		}
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		clusters, cpes := &clusterv1.ClusterList{}, &v1alpha1.ControlPlaneEtcdList{}
		if err := f.mgmt.Client.List(ctx, clusters, client.InNamespace(f.ns)); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		if err := f.mgmt.Client.List(ctx, cpes, client.InNamespace(f.ns)); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		return len(clusters.Items) == 0 && len(cpes.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("failed waiting for the fleet's Clusters and ControlPlaneEtcds to be gone: %w", err)
	}
	return nil
}

// waitObserved waits until every cluster's status satisfies ok.
func (f *fleet) waitObserved(ctx context.Context, ok func(*v1alpha1.ControlPlaneEtcd) bool) error {
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &v1alpha1.ControlPlaneEtcdList{}
		if err := f.mgmt.Client.List(ctx, list, client.InNamespace(f.ns)); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		n := 0
		for i := range list.Items {
			if ok(&list.Items[i]) {
				n++
			}
		}
		return n == f.n, nil
	})
}

func (f *fleet) close() error {
	var errs []error
	for _, c := range f.workloads {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}
