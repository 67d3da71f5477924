package kubeadm

import (
	"testing"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/etcdtest"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

func TestBackend_Maintenance(t *testing.T) {
	w := startWorkloadCluster(t, workload, 3)
	f := &faults{w: w}
	etcdtest.RunMaintenance(t, etcdtest.MaintenanceEnv{Backend: w.backend(t), Fragment: etcdcluster.Fragmenter(w.etcd), RaiseNoSpace: f.RaiseNoSpace})
}
