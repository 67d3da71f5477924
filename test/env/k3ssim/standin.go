package k3ssim

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// StandInKubelets adapts the kubelet stand-ins of test/env/kubelet, one per Node, to
// Kubelet. Stop makes the stand-in report Ready=Unknown (reason NodeStatusUnknown), which is
// what the node lifecycle controller writes once the kubelet of a removed server lost its
// API; Start makes it report Ready again.
//
// Note: start each stand-in with KubeletVersion set to the simulator's Profile().Version;
// otherwise the metadata controller and the stand-in overwrite each other's
// status.nodeInfo.kubeletVersion.
type StandInKubelets struct {
	mu       sync.Mutex
	kubelets map[string]*kubelet.Kubelet
}

var _ Kubelet = &StandInKubelets{}

// NewStandInKubelets returns the adapter for the given stand-ins.
func NewStandInKubelets(kubelets ...*kubelet.Kubelet) *StandInKubelets {
	s := &StandInKubelets{kubelets: map[string]*kubelet.Kubelet{}}
	for _, k := range kubelets {
		s.Add(k)
	}
	return s
}

// Add adds the stand-in of a server that joins later (JoinServer).
func (s *StandInKubelets) Add(k *kubelet.Kubelet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kubelets[k.NodeName()] = k
}

// Start makes the Node's stand-in report Ready.
func (s *StandInKubelets) Start(ctx context.Context, node string) error {
	k, err := s.get(node)
	if err != nil {
		return err
	}
	return k.SetReady(ctx)
}

// Stop makes the Node's stand-in report Ready=Unknown.
func (s *StandInKubelets) Stop(ctx context.Context, node string) error {
	k, err := s.get(node)
	if err != nil {
		return err
	}
	return k.SetNotReady(ctx, corev1.ConditionUnknown, "NodeStatusUnknown")
}

func (s *StandInKubelets) get(node string) (*kubelet.Kubelet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.kubelets[node]
	if !ok {
		return nil, fmt.Errorf("no kubelet stand-in for Node %s", node)
	}
	return k, nil
}
