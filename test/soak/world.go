package soak

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdadm"
	"github.com/etcd-adapter/etcd-adapter/test/env/managerproc"
)

// world is the management cluster (Cluster API's Machine and MachineHealthCheck controllers),
// the etcd-adapter webhook server, and two etcd-adapter controller replicas under leader
// election, as the Deployment runs them: processes of the manager binary, whose logs stay in
// logDir.
type world struct {
	scheme *runtime.Scheme
	mgmt   *env.Management
	bin    managerproc.Binary
	logDir string

	mu       sync.Mutex
	webhooks *replica
	replicas []*controllerReplica
	started  int
}

func startWorld(ctx context.Context, dir string) (_ *world, err error) {
	w := &world{scheme: env.Scheme(), logDir: dir}
	utilruntime.Must(v1alpha1.AddToScheme(w.scheme))
	kubeadmCRDs, err := capi.KubeadmCRDs()
	if err != nil {
		return nil, err
	}
	w.mgmt, err = env.StartManagementWith(ctx, env.ManagementOptions{
		Scheme:            w.scheme,
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")},
		CRDs:              append(kubeadmCRDs, etcdadm.ClusterCRD()),
		Webhooks:          &envtest.WebhookInstallOptions{Paths: []string{filepath.Join("..", "..", "config", "webhook")}},
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.stop())
		}
	}()
	if err := w.mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: adapterNamespace}}); err != nil {
		return nil, fmt.Errorf("failed to create namespace %s: %w", adapterNamespace, err)
	}
	if w.bin, err = managerproc.Build(ctx, dir, w.mgmt.Config); err != nil {
		return nil, err
	}
	if w.webhooks, err = w.startWebhooks(ctx); err != nil {
		return nil, err
	}
	for range 2 {
		if err := w.addReplica(ctx); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// addReplica starts one more controller replica.
func (w *world) addReplica(ctx context.Context) error {
	w.mu.Lock()
	w.started++
	name := fmt.Sprintf("replica-%d", w.started)
	w.mu.Unlock()
	r, err := w.startControllerReplica(ctx, name)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.replicas = append(w.replicas, r)
	w.mu.Unlock()
	go w.restartWhenExited(ctx, r)
	return nil
}

// restartWhenExited starts a new replica in place of one that ended on its own, as the kubelet
// restarts the Deployment's container (restartPolicy Always): controller-runtime ends the
// manager when it loses its Lease, which the soak's short Lease bounds make likely on a busy
// machine. A replica the soak killed is already out of the list (killReplica) and is left alone.
func (w *world) restartWhenExited(ctx context.Context, r *controllerReplica) {
	select {
	case <-ctx.Done():
		return
	case <-r.proc.Done():
	}
	w.mu.Lock()
	i := slices.Index(w.replicas, r)
	if i >= 0 {
		w.replicas = slices.Delete(w.replicas, i, i+1)
	}
	w.mu.Unlock()
	if i < 0 || ctx.Err() != nil {
		return
	}
	fmt.Printf("%s   %s ended on its own (%v; its log says why); starting a new replica, as the kubelet would\n",
		time.Now().Format("15:04:05.000"), r.name, r.proc.Err())
	if err := w.addReplica(ctx); err != nil {
		fmt.Printf("%s   failed to restart %s: %v\n", time.Now().Format("15:04:05.000"), r.name, err)
	}
}

// killReplica SIGKILLs the leader (leader true) or a replica that is not the leader, and starts
// a new replica in its place, as the Deployment's ReplicaSet does. It returns what it killed.
func (w *world) killReplica(ctx context.Context, leader bool) (string, error) {
	w.mu.Lock()
	victim := -1
	for i, r := range w.replicas {
		if r.elected() == leader {
			victim = i
			break
		}
	}
	if victim < 0 {
		victim = 0
	}
	r := w.replicas[victim]
	w.replicas = append(w.replicas[:victim:victim], w.replicas[victim+1:]...)
	w.mu.Unlock()
	what := fmt.Sprintf("%s (leader %t)", r.name, r.elected())
	if err := r.kill(); err != nil {
		return what, err
	}
	return what, w.addReplica(ctx)
}

func (w *world) stop() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	replicas := w.replicas
	w.replicas = nil // ended by the soak, not on their own: restartWhenExited leaves them alone
	for _, r := range replicas {
		errs = append(errs, r.kill())
	}
	if w.webhooks != nil {
		errs = append(errs, w.webhooks.kill())
	}
	errs = append(errs, w.mgmt.Stop())
	return errors.Join(errs...)
}
