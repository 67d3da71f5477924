package workload

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/secret"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// ExternalOptions shape a workload cluster with external etcd: etcd on hosts of its own (as
// etcdadm's EtcdadmCluster runs it, or as a person does), which the workload apiserver only
// dials. No Node hosts a member, so no kubelet stand-in runs.
type ExternalOptions struct {
	// APIServer is the workload apiserver to use; nil starts one, owned by the cluster.
	APIServer *env.APIServer
	// Members are the etcd members (default etcdcluster.Nodes("etcd", 3)).
	Members []etcdcluster.MemberSpec
}

// External is a running workload cluster with external etcd.
type External struct {
	parts
}

// StartExternal starts the etcd members and the workload apiserver. On error everything started
// so far is stopped.
func StartExternal(ctx context.Context, opts ExternalOptions) (_ *External, err error) {
	if len(opts.Members) == 0 {
		opts.Members = etcdcluster.Nodes("etcd", 3)
	}
	e := &External{}
	defer func() {
		if err != nil {
			_ = e.Close()
		}
	}()
	if err := e.useAPIServer(opts.APIServer); err != nil {
		return nil, err
	}
	if e.Etcd, err = etcdcluster.Start(ctx, etcdcluster.Options{Members: opts.Members}); err != nil {
		return nil, fmt.Errorf("failed to start the etcd cluster: %w", err)
	}
	return e, nil
}

// Secrets are the Secrets Cluster API names for the external etcd of Cluster cluster in
// namespace, as a provider of external etcd writes them (Cluster API util/secret): <cluster>-etcd
// with the CA certificate alone (the CA key stays with etcd's owner), and
// <cluster>-apiserver-etcd-client with the apiserver's client certificate and key.
func (e *External) Secrets(namespace, cluster string) []*corev1.Secret {
	kp := e.Etcd.ClientKeyPair()
	return []*corev1.Secret{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secret.Name(cluster, secret.EtcdCA)},
			Data:       map[string][]byte{secret.TLSCrtDataName: e.Etcd.CA().CertPEM()},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secret.Name(cluster, secret.APIServerEtcdClient)},
			Data:       map[string][]byte{secret.TLSCrtDataName: kp.Cert, secret.TLSKeyDataName: kp.Key},
		},
	}
}

// ClientURLs are the members' client URLs, in member order: the endpoints an EtcdadmCluster
// publishes in status.endpoints.
func (e *External) ClientURLs() []string {
	var urls []string
	for _, m := range e.Etcd.Members() {
		urls = append(urls, m.ClientURL())
	}
	return urls
}

// Close stops etcd, and the apiserver when the cluster started it.
func (e *External) Close() error { return e.close() }
