package kcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// Options configures Start.
type Options struct {
	// Namespace and ClusterName of the Cluster (default "default" and "kcp").
	Namespace, ClusterName string
	// EtcdAdapter runs etcd-adapter beside KCP, as its manager binary runs it: its CRD, its
	// controllers and its webhooks (config/webhook), served in-process and called by the
	// management apiserver. GuardDecisions lists what the quorum guard answered.
	EtcdAdapter bool
	// KubernetesVersion is the version the KubeadmControlPlane is asked for and the kubelet
	// stand-ins report (default KubernetesVersion).
	KubernetesVersion string
	// KubeadmFeatureGates are the kubeadm feature gates of the KubeadmControlPlane's
	// ClusterConfiguration, e.g. ControlPlaneKubeletLocalMode false for a join that registers
	// the Node before it adds the etcd learner (see workload.JoinNodeFirst).
	KubeadmFeatureGates map[string]bool
	// EtcdStartDelay is how long the etcd static Pod of a Node-first join takes to start after
	// kubeadm added the learner, as when the kubelet pulls etcd's image; it starts no sooner than
	// the Machine has its nodeRef. Zero starts it then.
	//
	// Important! KCP v1.14.2 removes a learner with no name itself once its Node is 20 s old
	// (etcdMemberStartupGracePeriod, kubeadmcontrolplane_controller.go reconcileEtcdMembers),
	// whenever it reconciles with EtcdClusterHealthy not True: a delay near that loses the
	// learner to KCP, not to etcd-adapter.
	EtcdStartDelay time.Duration
}

// Env is a management cluster running Cluster API's Cluster, Machine and MachineHealthCheck
// controllers, KubeadmControlPlane and the kubeadm bootstrap controller, with one Cluster whose
// workload apiserver is up and whose control plane KCP builds from nothing (see
// CreateControlPlane).
type Env struct {
	// Management is the management apiserver; its Client knows the KCP and kubeadm types.
	Management *env.APIServer
	// Cluster is the Cluster; its controlPlaneRef names the KubeadmControlPlane ClusterName.
	Cluster *clusterv1.Cluster

	workloadAPI *workloadAPIServer
	workload    *workloadCluster
	core, kcp   *runningManager
	adapter     *runningManager
	guard       guardRecorder
	person      client.Client
	opts        Options
}

// Start starts the management and workload apiservers and the controllers, and creates the
// Cluster with its `<cluster>-ca` Secret (the CA the workload apiserver trusts, as a user brings
// their own CA to KCP). Call Stop when done, also when a test fails.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	opts = opts.withDefaults()
	e := &Env{opts: opts}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Stop())
		}
	}()
	ca, err := newClusterCA()
	if err != nil {
		return nil, err
	}
	if e.workloadAPI, err = startWorkloadAPIServer(ca); err != nil {
		return nil, err
	}
	e.workload = newWorkloadCluster(e.workloadAPI, opts.KubernetesVersion, opts.EtcdStartDelay)
	if e.Management, err = startManagementAPIServer(opts.EtcdAdapter); err != nil {
		return nil, err
	}
	if e.person, err = client.New(impersonating(e.Management.Config, PersonUser), client.Options{Scheme: Scheme()}); err != nil {
		return nil, fmt.Errorf("failed to create the person's client: %w", err)
	}
	if e.Cluster, err = e.createCluster(ctx, opts, ca); err != nil {
		return nil, err
	}
	if e.core, err = startCoreManager(ctx, e.Management.Config, e.workload); err != nil {
		return nil, err
	}
	if e.kcp, err = startKubeadmManager(ctx, impersonating(e.Management.Config, KCPUser)); err != nil {
		return nil, err
	}
	if opts.EtcdAdapter {
		if e.adapter, err = startAdapterManager(ctx, e.Management.Config, e.Management.WebhookInstallOptions(), &e.guard); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = metav1.NamespaceDefault
	}
	if o.ClusterName == "" {
		o.ClusterName = "kcp"
	}
	if o.KubernetesVersion == "" {
		o.KubernetesVersion = KubernetesVersion
	}
	return o
}

func startManagementAPIServer(etcdAdapter bool) (*env.APIServer, error) {
	coreDir, err := capi.CoreCRDDir()
	if err != nil {
		return nil, err
	}
	opts := env.APIServerOptions{Scheme: Scheme(), CRDDirectoryPaths: []string{coreDir}}
	if etcdAdapter {
		crdDir, webhooks, err := adapterInstall()
		if err != nil {
			return nil, err
		}
		opts.CRDDirectoryPaths = append(opts.CRDDirectoryPaths, crdDir)
		opts.Webhooks = webhooks
	}
	kubeadmCRDs, err := capi.KubeadmCRDs()
	if err != nil {
		return nil, err
	}
	opts.CRDs = append([]*apiextensionsv1.CustomResourceDefinition{infra.MachineCRD(), MachineTemplateCRD(), ClusterCRD()}, kubeadmCRDs...)
	s, err := env.StartAPIServer(opts)
	if err != nil {
		return nil, fmt.Errorf("failed to start the management apiserver: %w", err)
	}
	return s, nil
}

// createCluster creates the `<cluster>-ca` Secret and the Cluster: its control plane endpoint
// is the workload apiserver, its control plane the KubeadmControlPlane and its infrastructure
// the TestCluster of the same name.
func (e *Env) createCluster(ctx context.Context, opts Options, ca *keyPair) (*clusterv1.Cluster, error) {
	c := e.Management.Client
	key := client.ObjectKey{Namespace: opts.Namespace, Name: opts.ClusterName}
	caCert := &secret.Certificate{Purpose: secret.ClusterCA, KeyPair: &certs.KeyPair{Cert: ca.certPEM, Key: ca.keyPEM}}
	if err := c.Create(ctx, caCert.AsSecret(key, metav1.OwnerReference{})); err != nil {
		return nil, fmt.Errorf("failed to create the cluster CA Secret of %s: %w", key, err)
	}
	endpoint, err := e.controlPlaneEndpoint()
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, newTestCluster(key.Namespace, key.Name)); err != nil {
		return nil, fmt.Errorf("failed to create %s %s: %w", ClusterKind, key, err)
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneEndpoint: endpoint,
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: key.Name,
			},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infra.Group, Kind: ClusterKind, Name: key.Name,
			},
		},
	}
	if err := c.Create(ctx, cluster); err != nil {
		return nil, fmt.Errorf("failed to create Cluster %s: %w", key, err)
	}
	return cluster, nil
}

func (e *Env) controlPlaneEndpoint() (clusterv1.APIEndpoint, error) {
	hp, err := e.workloadAPI.HostPort()
	if err != nil {
		return clusterv1.APIEndpoint{}, err
	}
	host, p, err := net.SplitHostPort(hp)
	if err != nil {
		return clusterv1.APIEndpoint{}, fmt.Errorf("failed to parse the workload apiserver address %q: %w", hp, err)
	}
	port, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		return clusterv1.APIEndpoint{}, fmt.Errorf("failed to parse the workload apiserver port %q: %w", p, err)
	}
	return clusterv1.APIEndpoint{Host: host, Port: int32(port)}, nil
}

// WorkloadConfig connects to the workload apiserver as an administrator (client certificate
// signed by the cluster CA).
func (e *Env) WorkloadConfig() *rest.Config { return e.workloadAPI.Config }

// WorkloadClient is an uncached client of the workload apiserver.
func (e *Env) WorkloadClient() client.Client { return e.workloadAPI.Client }

// Etcd returns the workload cluster's etcd, nil until the first Machine ran kubeadm init.
func (e *Env) Etcd() *etcdcluster.Cluster { return e.workload.etcdCluster() }

// Kubelet returns the kubelet stand-in of the Machine's Node (Node name = Machine name), or nil.
func (e *Env) Kubelet(machineName string) *kubelet.Kubelet { return e.workload.kubelet(machineName) }

// PersonClient is an uncached client of the management apiserver acting as PersonUser: what a
// person's kubectl does, e.g. `kubectl delete machine`.
func (e *Env) PersonClient() client.Client { return e.person }

// JoinSteps returns the steps the Machine's `kubeadm join --control-plane` played, in order;
// none for the Machine that ran `kubeadm init` or one not provisioned yet.
func (e *Env) JoinSteps(machineName string) []workload.JoinStep {
	return e.workload.joinSteps(machineName)
}

// JoinError returns what the Machine's Node-first join (see Options.EtcdStartDelay) failed
// with, after kubelet-start; nil while it runs, once it completed, or for another join.
func (e *Env) JoinError(machineName string) error { return e.workload.joinError(machineName) }

// GuardDecisions returns every answer the quorum guard gave to a Machine DELETE so far, in order
// (only with Options.EtcdAdapter).
func (e *Env) GuardDecisions() []GuardDecision { return e.guard.all() }

// Stop stops the controllers, the workload cluster's Nodes and etcd, and both apiservers. Safe
// to call more than once.
func (e *Env) Stop() error {
	errs := []error{e.adapter.stop(), e.kcp.stop(), e.core.stop()}
	e.adapter, e.kcp, e.core = nil, nil, nil
	if e.workload != nil {
		errs = append(errs, e.workload.close())
	}
	if e.workloadAPI != nil {
		errs = append(errs, e.workloadAPI.Stop())
	}
	if e.Management != nil {
		errs = append(errs, e.Management.Stop())
	}
	return errors.Join(errs...)
}
