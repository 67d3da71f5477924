// Package inprocess runs the etcd-adapter manager inside a test or demo process, beside a
// management cluster of test/env, the way the etcd-adapter binary runs it (manager.Run).
package inprocess

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	"github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter/manager"
	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// ManagerOptions are the manager's options for mgmt: its webhooks served where the management
// apiserver was told to call them, health and diagnostics on free ports, a 5 s etcd call timeout
// (with a 4 s dial timeout, which must be shorter), and controller names that may repeat, because
// Cluster API's own controllers run in the same process.
func ManagerOptions(mgmt *env.Management) *manager.Options {
	wh := mgmt.WebhookInstallOptions()
	o := manager.NewOptions()
	o.HealthAddr = "0"
	o.Diagnostics.DiagnosticsAddress = "0"
	o.WebhookHost, o.WebhookPort, o.WebhookCertDir = wh.LocalServingHost, wh.LocalServingPort, wh.LocalServingCertDir
	o.EtcdCallTimeout = 5 * time.Second
	o.EtcdDialTimeout = 4 * time.Second
	o.SkipNameValidation = true
	return o
}

// StartManager runs the manager with o against cfg until stop is called. stop cancels it and
// returns what manager.Run returned, or an error when it did not stop within stopTimeout.
func StartManager(ctx context.Context, cfg *rest.Config, o *manager.Options, stopTimeout time.Duration) (stop func() error) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- manager.Run(runCtx, cfg, o) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(stopTimeout):
			return fmt.Errorf("the etcd-adapter manager did not stop within %s", stopTimeout)
		}
	}
}
