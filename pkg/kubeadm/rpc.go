package kubeadm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// call runs one etcd call with its own deadline, CallTimeout.
func call[T any](ctx context.Context, b *Backend, what string, fn func(context.Context) (T, error)) (T, error) {
	return callWithin(ctx, b.cfg.CallTimeout, what, fn)
}

// callWithin runs one etcd call with its own deadline.
func callWithin[T any](ctx context.Context, timeout time.Duration, what string, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%s: call timeout %s expired", what, timeout))
	defer cancel()
	return fn(ctx)
}

// isLearnerRejection reports etcd's "rpc not supported for learner": a fact about the
// member, not a failure.
func isLearnerRejection(err error) bool {
	return err != nil && (errors.Is(err, rpctypes.ErrGRPCNotSupportedForLearner) ||
		strings.Contains(err.Error(), "rpc not supported for learner"))
}

// isClassified reports whether err already carries one of the etcd error classes.
func isClassified(err error) bool {
	return errors.Is(err, etcd.ErrUnreachable) || errors.Is(err, etcd.ErrRefused) || errors.Is(err, etcd.ErrInvalidInput)
}
