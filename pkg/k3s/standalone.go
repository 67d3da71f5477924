package k3s

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Start connects to the workload cluster at restConfig without a manager: it starts a Node
// informer, waits for it to sync and returns a Backend that reads Nodes from it and is notified
// by it. cfg.Client and cfg.Reader are filled in when nil. Stop the Backend when done.
func Start(ctx context.Context, restConfig *rest.Config, cfg Config) (*Backend, error) {
	if restConfig == nil {
		return nil, fmt.Errorf("%w: k3s.Start needs a REST config", etcd.ErrInvalidInput)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("failed to build scheme: %w", err)
	}
	if cfg.Client == nil {
		c, err := client.New(restConfig, client.Options{Scheme: scheme})
		if err != nil {
			return nil, fmt.Errorf("%w: failed to create workload cluster client: %w", etcd.ErrUnreachable, err)
		}
		cfg.Client = c
	}
	cache, err := ctrlcache.New(restConfig, ctrlcache.Options{Scheme: scheme, ByObject: map[client.Object]ctrlcache.ByObject{&corev1.Node{}: NodeCacheOptions()}})
	if err != nil {
		return nil, fmt.Errorf("failed to create Node cache: %w", err)
	}
	if cfg.Reader == nil {
		cfg.Reader = cache
	}
	b, err := New(cfg)
	if err != nil {
		return nil, err
	}
	informer, err := cache.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return nil, fmt.Errorf("failed to get Node informer: %w", err)
	}
	if err := b.AttachInformer(informer); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The cache's error after a cancel is only the cancellation itself.
		_ = cache.Start(runCtx)
	}()
	b.stop = func() {
		cancel()
		<-done
	}
	if !cache.WaitForCacheSync(ctx) {
		b.Stop()
		return nil, fmt.Errorf("%w: failed to sync the Node cache: %w", etcd.ErrUnreachable, errors.Join(ctx.Err(), context.Cause(ctx)))
	}
	return b, nil
}

// Stop stops what Start started; it does nothing for a Backend made by New.
func (b *Backend) Stop() {
	if b.stop != nil {
		b.stop()
		b.stop = nil
	}
}
