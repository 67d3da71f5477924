package workload

import (
	"errors"
	"sync"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// parts are what both flavours are made of: an apiserver (owned when started here), an etcd
// cluster, and a kubelet stand-in per Node.
type parts struct {
	APIServer *env.APIServer
	Etcd      *etcdcluster.Cluster
	// Nodes are the control-plane Node names the cluster started with, in member order.
	Nodes []string

	ownsAPIServer bool
	mu            sync.Mutex
	kubelets      map[string]*kubelet.Kubelet
}

// useAPIServer takes the given apiserver, or starts one that Close will stop.
func (p *parts) useAPIServer(given *env.APIServer) error {
	p.kubelets = map[string]*kubelet.Kubelet{}
	if given != nil {
		p.APIServer = given
		return nil
	}
	s, err := env.StartAPIServer(env.WorkloadAPIServerOptions())
	if err != nil {
		return err
	}
	p.APIServer, p.ownsAPIServer = s, true
	return nil
}

func (p *parts) addKubelet(kl *kubelet.Kubelet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kubelets[kl.NodeName()] = kl
}

// Kubelet returns the stand-in of the named Node, or nil.
func (p *parts) Kubelet(node string) *kubelet.Kubelet {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kubelets[node]
}

// close stops the kubelet stand-ins, etcd, and the apiserver when it was started here.
func (p *parts) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, kl := range p.kubelets {
		errs = append(errs, kl.Stop())
	}
	if p.Etcd != nil {
		errs = append(errs, p.Etcd.Close())
	}
	if p.ownsAPIServer && p.APIServer != nil {
		errs = append(errs, p.APIServer.Stop())
	}
	return errors.Join(errs...)
}
