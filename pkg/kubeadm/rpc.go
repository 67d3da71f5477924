package kubeadm

import (
	"context"
	"errors"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
)

// call runs one call with its own deadline, CallTimeout.
func call[T any](ctx context.Context, b *Backend, what string, fn func(context.Context) (T, error)) (T, error) {
	return membership.Call(ctx, b.cfg.CallTimeout, what, fn)
}

// isClassified reports whether err already carries one of the etcd error classes.
func isClassified(err error) bool {
	return errors.Is(err, etcd.ErrUnreachable) || errors.Is(err, etcd.ErrRefused) || errors.Is(err, etcd.ErrInvalidInput)
}
