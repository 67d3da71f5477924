package env

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterInput describes a workload cluster to register in the management cluster.
type ClusterInput struct {
	// Namespace and Name of the Cluster object.
	Namespace, Name string

	// Workload connects to the workload cluster's apiserver (for example APIServer.Config). The
	// `<name>-kubeconfig` Secret carries its URL, CA and client credentials.
	Workload *rest.Config

	// EtcdCACert and EtcdCAKey are the PEM-encoded etcd CA (for example pki.CA CertPEM and KeyPEM),
	// stored in the `<name>-etcd` Secret the way KubeadmControlPlane keeps it. If both are empty
	// no etcd Secret is created.
	EtcdCACert, EtcdCAKey []byte
}

// RegisterCluster creates a Cluster whose infrastructure is provisioned and whose control plane
// is initialized (no Cluster controller runs, so the status is set here), the
// `<name>-kubeconfig` Secret through which Cluster API's ClusterCache connects, and the
// `<name>-etcd` CA Secret. The Cluster has no control plane or infrastructure reference, so
// Machines decide Node deletion on their own, as with any standalone control plane.
func RegisterCluster(ctx context.Context, c client.Client, in ClusterInput) (*clusterv1.Cluster, error) {
	cluster, err := createCluster(ctx, c, in)
	if err != nil {
		return nil, err
	}
	data, err := kubeconfigFor(cluster.Name, in.Workload)
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, kubeconfig.GenerateSecret(cluster, data)); err != nil {
		return nil, fmt.Errorf("failed to create the kubeconfig Secret of Cluster %s: %w", in.Name, err)
	}
	if len(in.EtcdCACert) > 0 || len(in.EtcdCAKey) > 0 {
		if err := c.Create(ctx, etcdCASecret(cluster, in.EtcdCACert, in.EtcdCAKey)); err != nil {
			return nil, fmt.Errorf("failed to create the etcd CA Secret of Cluster %s: %w", in.Name, err)
		}
	}
	return cluster, nil
}

func createCluster(ctx context.Context, c client.Client, in ClusterInput) (*clusterv1.Cluster, error) {
	endpoint, err := apiEndpoint(in.Workload.Host)
	if err != nil {
		return nil, err
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: in.Name},
		Spec:       clusterv1.ClusterSpec{ControlPlaneEndpoint: endpoint},
	}
	if err := c.Create(ctx, cluster); err != nil {
		return nil, fmt.Errorf("failed to create Cluster %s/%s: %w", in.Namespace, in.Name, err)
	}
	markInitialized(cluster)
	if err := c.Status().Update(ctx, cluster); err != nil {
		return nil, fmt.Errorf("failed to mark Cluster %s/%s initialized: %w", in.Namespace, in.Name, err)
	}
	return cluster, nil
}

// MarkInitialized sets the status of a Cluster created without one (as `clusterctl move` creates
// it on the target management cluster) to what RegisterCluster gives it: infrastructure
// provisioned, control plane initialized. In a real management cluster Cluster API's Cluster
// controller sets it from the infrastructure and control-plane objects; none runs here, and the
// ClusterCache connects only to a Cluster whose control plane is initialized.
func MarkInitialized(ctx context.Context, c client.Client, cluster *clusterv1.Cluster) error {
	markInitialized(cluster)
	if err := c.Status().Update(ctx, cluster); err != nil {
		return fmt.Errorf("failed to mark Cluster %s/%s initialized: %w", cluster.Namespace, cluster.Name, err)
	}
	return nil
}

// markInitialized sets what the Cluster controller would once infrastructure and control plane
// are up: the contract fields the ClusterCache waits for and the conditions Machine and
// MachineHealthCheck controllers read.
func markInitialized(cluster *clusterv1.Cluster) {
	cluster.Status.Initialization = clusterv1.ClusterInitializationStatus{
		InfrastructureProvisioned: ptr.To(true),
		ControlPlaneInitialized:   ptr.To(true),
	}
	conditions.Set(cluster, metav1.Condition{
		Type:   clusterv1.ClusterInfrastructureReadyCondition,
		Status: metav1.ConditionTrue,
		Reason: clusterv1.ClusterInfrastructureReadyReason,
	})
	conditions.Set(cluster, metav1.Condition{
		Type:   clusterv1.ClusterControlPlaneInitializedCondition,
		Status: metav1.ConditionTrue,
		Reason: clusterv1.ClusterControlPlaneInitializedReason,
	})
}

func apiEndpoint(host string) (clusterv1.APIEndpoint, error) {
	u, err := url.Parse(host)
	if err != nil {
		return clusterv1.APIEndpoint{}, fmt.Errorf("failed to parse apiserver URL %q: %w", host, err)
	}
	h, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		return clusterv1.APIEndpoint{}, fmt.Errorf("failed to parse apiserver address %q: %w", u.Host, err)
	}
	port, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		return clusterv1.APIEndpoint{}, fmt.Errorf("failed to parse apiserver port %q: %w", p, err)
	}
	return clusterv1.APIEndpoint{Host: h, Port: int32(port)}, nil
}

// kubeconfigFor writes cfg (URL, CA, client certificate) as a kubeconfig with one context.
func kubeconfigFor(clusterName string, cfg *rest.Config) ([]byte, error) {
	user := clusterName + "-admin"
	kc := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{clusterName: {
			Server:                   cfg.Host,
			CertificateAuthorityData: cfg.CAData,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{user: {
			ClientCertificateData: cfg.CertData,
			ClientKeyData:         cfg.KeyData,
		}},
		Contexts:       map[string]*clientcmdapi.Context{user + "@" + clusterName: {Cluster: clusterName, AuthInfo: user}},
		CurrentContext: user + "@" + clusterName,
	}
	data, err := clientcmd.Write(kc)
	if err != nil {
		return nil, fmt.Errorf("failed to write the kubeconfig of Cluster %s: %w", clusterName, err)
	}
	return data, nil
}

// etcdCASecret is the `<cluster>-etcd` Secret as KubeadmControlPlane creates it: type
// cluster.x-k8s.io/secret, keys tls.crt and tls.key, cluster-name label, owned by the Cluster.
func etcdCASecret(cluster *clusterv1.Cluster, certPEM, keyPEM []byte) *corev1.Secret {
	ca := &secret.Certificate{
		Purpose:   secret.EtcdCA,
		KeyPair:   &certs.KeyPair{Cert: certPEM, Key: keyPEM},
		Generated: true,
	}
	return ca.AsSecret(client.ObjectKeyFromObject(cluster), metav1.OwnerReference{
		APIVersion: clusterv1.GroupVersion.String(),
		Kind:       "Cluster",
		Name:       cluster.Name,
		UID:        cluster.UID,
	})
}
