package kubeadm

import (
	"context"
	"fmt"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
)

var _ membership.Maintainer = &memberClient{}

// Defragment defragments the member over the client's own port-forward: the maintenance client
// is bound to that connection, so no other member is reached.
func (m *memberClient) Defragment(ctx context.Context) error {
	mc, err := m.maintainer()
	if err != nil {
		return err
	}
	return mc.Defragment(ctx)
}

// AlarmDisarm disarms an alarm over the client's own port-forward.
func (m *memberClient) AlarmDisarm(ctx context.Context, memberID uint64, alarm etcd.Alarm) error {
	mc, err := m.maintainer()
	if err != nil {
		return err
	}
	return mc.AlarmDisarm(ctx, memberID, alarm)
}

func (m *memberClient) maintainer() (membership.Maintainer, error) {
	mc, ok := m.Client.(membership.Maintainer)
	if !ok {
		return nil, fmt.Errorf("%w: the etcd client of Node %s has no maintenance API", etcd.ErrInvalidInput, m.node)
	}
	return mc, nil
}
