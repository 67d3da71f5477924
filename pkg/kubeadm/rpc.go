package kubeadm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// isEtcdAnswer reports whether err came from etcd itself (it was listening and answered with
// an error) rather than from the connection. etcd's own errors are recognised by their text
// (rpctypes); a status that gRPC made up on the client side for a broken stream (Unavailable,
// DeadlineExceeded, Canceled, or Unknown/Internal such as "malformed header: missing HTTP
// content-type" when a port-forward dies mid-call) is the connection's.
func isEtcdAnswer(err error) bool {
	if err == nil {
		return false
	}
	var etcdErr rpctypes.EtcdError
	if errors.As(rpctypes.Error(err), &etcdErr) {
		return true
	}
	s, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch s.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Internal:
		return strings.HasPrefix(s.Message(), "etcdserver:")
	}
	return true
}

// isClassified reports whether err already carries one of the etcd error classes.
func isClassified(err error) bool {
	return errors.Is(err, etcd.ErrUnreachable) || errors.Is(err, etcd.ErrRefused) || errors.Is(err, etcd.ErrInvalidInput)
}
