package external

import (
	"testing"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/etcdtest"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

func TestBackend_Maintenance(t *testing.T) {
	e := startExternal(t, mgmt, 3)
	f := &faults{e: e}
	etcdtest.RunMaintenance(t, etcdtest.MaintenanceEnv{Backend: e.backend(t), Fragment: etcdcluster.Fragmenter(e.etcd), RaiseNoSpace: f.RaiseNoSpace})
}
