package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter/manager"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/inprocess"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

const (
	// namespace holds the demo's Clusters.
	namespace = "demo"
	// observationInterval is the demo ControlPlaneEtcds' spec.observationInterval: short, so a
	// kubeadm member failure shows within seconds (the default is 30 s).
	observationInterval = 2 * time.Second
	// managerStopTimeout bounds the manager's graceful shutdown.
	managerStopTimeout = time.Minute
)

// playground is everything the demo started.
type playground struct {
	mgmt    *env.Management
	k3s     *workload.K3s
	kubeadm *workload.Kubeadm

	stopManager func() error
	health      string
	clusters    map[string]*clusterv1.Cluster
	// machines are the control-plane Machines by Cluster, then Node name.
	machines map[string]map[string]*clusterv1.Machine
}

// startManagement starts the management cluster with etcd-adapter's CRDs and webhook
// configuration, and the etcd-adapter manager.
func (p *playground) startManagement(ctx context.Context, root string) error {
	mgmt, err := env.StartManagementWith(ctx, env.ManagementOptions{
		Scheme:            manager.Scheme(),
		CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases")},
		Webhooks: &envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(root, "config", "webhook", "manifests.yaml")},
		},
	})
	if err != nil {
		return fmt.Errorf("failed to start the management cluster: %w", err)
	}
	p.mgmt = mgmt
	return p.startManager(ctx)
}

func (p *playground) startManager(ctx context.Context) error {
	health, err := freeAddr()
	if err != nil {
		return err
	}
	o := inprocess.ManagerOptions(p.mgmt)
	o.HealthAddr, p.health = health, health
	p.stopManager = inprocess.StartManager(ctx, p.mgmt.Config, o, managerStopTimeout)
	return nil
}

// startWorkloads starts both workload clusters at once.
func (p *playground) startWorkloads(ctx context.Context) error {
	k3sDone := make(chan error, 1)
	go func() {
		var err error
		p.k3s, err = workload.StartK3s(ctx, workload.K3sOptions{Members: 3, Tick: 200 * time.Millisecond})
		k3sDone <- err
	}()
	var err error
	p.kubeadm, err = workload.StartKubeadm(ctx, workload.KubeadmOptions{Members: 3})
	return errors.Join(err, <-k3sDone)
}

// register creates each Cluster, its ControlPlaneEtcd (Manage mode: no control-plane provider
// runs here, so etcd-adapter removes members) and one control-plane Machine per Node.
func (p *playground) register(ctx context.Context) error {
	p.clusters, p.machines = map[string]*clusterv1.Cluster{}, map[string]map[string]*clusterv1.Machine{}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := p.mgmt.Client.Create(ctx, ns); err != nil {
		return fmt.Errorf("failed to create Namespace %s: %w", namespace, err)
	}
	ca := p.kubeadm.Etcd.CA()
	inputs := []struct {
		in      env.ClusterInput
		backend v1alpha1.Backend
		wl      *rest.Config
		nodes   []string
	}{
		{env.ClusterInput{Namespace: namespace, Name: "k3s", Workload: p.k3s.APIServer.Config}, v1alpha1.BackendK3s, p.k3s.APIServer.Config, p.k3s.Nodes},
		{env.ClusterInput{Namespace: namespace, Name: "kubeadm", Workload: p.kubeadm.APIServer.Config, EtcdCACert: ca.CertPEM(), EtcdCAKey: ca.KeyPEM()},
			v1alpha1.BackendKubeadm, p.kubeadm.APIServer.Config, p.kubeadm.Nodes},
	}
	for _, c := range inputs {
		cluster, err := env.RegisterCluster(ctx, p.mgmt.Client, c.in)
		if err != nil {
			return err
		}
		p.clusters[cluster.Name] = cluster
		cpe := &v1alpha1.ControlPlaneEtcd{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cluster.Name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
			}}},
			Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: cluster.Name, Backend: c.backend, Mode: v1alpha1.ModeManage,
				ObservationInterval: &metav1.Duration{Duration: observationInterval}},
		}
		if err := p.mgmt.Client.Create(ctx, cpe); err != nil {
			return fmt.Errorf("failed to create ControlPlaneEtcd %s/%s: %w", namespace, cluster.Name, err)
		}
		wl, err := client.New(c.wl, client.Options{})
		if err != nil {
			return fmt.Errorf("failed to create a client for Cluster %s: %w", cluster.Name, err)
		}
		p.machines[cluster.Name] = map[string]*clusterv1.Machine{}
		for _, node := range c.nodes {
			m, err := bindMachine(ctx, p.mgmt.Client, wl, cluster, node)
			if err != nil {
				return err
			}
			p.machines[cluster.Name][node] = m
		}
	}
	return nil
}

// bindMachine gives the Node a providerID and creates a control-plane Machine reporting it;
// Cluster API's Machine controller then binds them (status.nodeRef).
func bindMachine(ctx context.Context, mgmt, wl client.Client, cluster *clusterv1.Cluster, node string) (*clusterv1.Machine, error) {
	providerID := fmt.Sprintf("demo://%s/%s", cluster.Name, node)
	n := &corev1.Node{}
	if err := wl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return nil, fmt.Errorf("failed to get Node %s of Cluster %s: %w", node, cluster.Name, err)
	}
	before := n.DeepCopy()
	n.Spec.ProviderID = providerID
	if err := wl.Patch(ctx, n, client.MergeFrom(before)); err != nil {
		return nil, fmt.Errorf("failed to set the providerID of Node %s: %w", node, err)
	}
	return env.CreateControlPlaneMachine(ctx, mgmt, env.MachineInput{Cluster: cluster, Name: cluster.Name + "-" + node, ProviderID: providerID})
}

// writeKubeconfig writes an admin kubeconfig for the management cluster.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"management": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"admin": {ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}},
		Contexts:       map[string]*clientcmdapi.Context{"etcd-adapter-demo": {Cluster: "management", AuthInfo: "admin", Namespace: namespace}},
		CurrentContext: "etcd-adapter-demo",
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("failed to create the kubeconfig directory: %w", err)
	}
	if err := clientcmd.WriteToFile(kc, path); err != nil {
		return fmt.Errorf("failed to write the kubeconfig %s: %w", path, err)
	}
	return nil
}

// close stops everything that was started, the manager first and the workload clusters last.
func (p *playground) close() error {
	var errs []error
	if p.stopManager != nil {
		errs = append(errs, p.stopManager())
	}
	if p.mgmt != nil {
		errs = append(errs, p.mgmt.Stop())
	}
	if p.k3s != nil {
		errs = append(errs, p.k3s.Close())
	}
	if p.kubeadm != nil {
		errs = append(errs, p.kubeadm.Close())
	}
	return errors.Join(errs...)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("failed to find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}
