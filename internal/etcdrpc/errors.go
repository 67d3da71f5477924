// Package etcdrpc classifies the errors of etcd's client (clientv3) for the backends that call
// etcd themselves (pkg/kubeadm through a port-forward, pkg/external directly).
package etcdrpc

import (
	"errors"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// IsEtcdAnswer reports whether err came from etcd itself (it was listening and answered with
// an error) rather than from the connection. etcd's own errors are recognised by their text
// (rpctypes); a status that gRPC made up on the client side for a broken stream (Unavailable,
// DeadlineExceeded, Canceled, or Unknown/Internal such as "malformed header: missing HTTP
// content-type" when a port-forward dies mid-call) is the connection's.
func IsEtcdAnswer(err error) bool {
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

// transientRemoveErrors are etcd's answers after which a removal may still happen, or may have
// happened already: the leader changed or stopped while the change was being applied (etcd
// answers these when the target stops after applying its own removal), or etcd refuses for now
// (strict reconfiguration check, not enough started members, learner not caught up).
var transientRemoveErrors = []error{
	rpctypes.ErrLeaderChanged, rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail,
	rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrNoLeader, rpctypes.ErrStopped,
	rpctypes.ErrUnhealthy, rpctypes.ErrMemberNotEnoughStarted, rpctypes.ErrMemberLearnerNotReady,
}

// IsTransientRemoval reports whether etcd's answer to a MemberRemove (as rpctypes.Error gives
// it) leaves the removal possible or already done: call again and confirm.
func IsTransientRemoval(etcdErr error) bool {
	return slices.ContainsFunc(transientRemoveErrors, func(e error) bool { return errors.Is(etcdErr, e) })
}
