// Command controller is cert-manager's controller for the test environment: the controllers that
// issue a Certificate from a self-signed or CA Issuer, built over the packages of
// github.com/cert-manager/cert-manager. The upstream main (cmd/controller, a module of its own,
// github.com/cert-manager/cert-manager/controller-binary) is not served by the Go module proxy;
// this runs the same controllers the way its app/controller.go does: each registered
// constructor over one controller.ContextFactory, then the shared informer factories started.
// ACME, Vault, Venafi, the certificate shims and CertificateSigningRequests are left out.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// The controllers and issuers, registered by their init functions.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the apiserver")
	clusterResourceNamespace := flag.String("cluster-resource-namespace", "kube-system", "namespace of ClusterIssuers' Secrets")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *clusterResourceNamespace); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, clusterResourceNamespace string) error {
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	// The defaults of cert-manager's controller configuration
	// (internal/apis/config/controller/v1alpha1/defaults.go).
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: clusterResourceNamespace},
		CertificateOptions: controller.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return fmt.Errorf("failed to build the controller context: %w", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(controller.Known()))
	for name, construct := range controller.Known() {
		c, err := construct(factory)
		if err != nil {
			return fmt.Errorf("failed to construct controller %s: %w", name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Run(5, ctx); err != nil {
				errs <- fmt.Errorf("controller %s: %w", name, err)
			}
		}()
	}
	shared, err := factory.Build()
	if err != nil {
		return fmt.Errorf("failed to build the shared context: %w", err)
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	wg.Wait()
	close(errs)
	return <-errs
}
