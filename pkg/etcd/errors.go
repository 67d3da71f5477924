package etcd

import (
	"errors"
	"fmt"
)

// Error classes every backend wraps its errors in (fmt.Errorf("%w: ...", ErrUnreachable)), so a
// caller can branch with errors.Is without knowing the backend.
var (
	// ErrUnreachable: etcd (or the workload apiserver in front of it) could not be reached.
	ErrUnreachable = errors.New("cannot reach etcd")
	// ErrRefused: etcd answered and refused the request.
	ErrRefused = errors.New("etcd refused the request")
	// ErrInvalidInput: the request or the configuration is wrong (missing CA Secret, Node
	// without a member, ...); retrying without a change will not help.
	ErrInvalidInput = errors.New("invalid input")
	// ErrEndpointNotAllowed: an etcd endpoint resolves outside the networks the manager may dial
	// (--etcd-allowed-networks); it was not dialled. It wraps ErrInvalidInput: only a change of
	// the endpoint or of the allow-list helps.
	ErrEndpointNotAllowed = fmt.Errorf("%w: etcd endpoint outside the networks etcd-adapter may dial", ErrInvalidInput)
	// ErrLeaderNotReachable: the member the others name leader did not answer the backend, so
	// leadership cannot be moved through it (etcd takes MoveLeader from the leader only). Its
	// peers may still reach it. It wraps ErrUnreachable.
	ErrLeaderNotReachable = fmt.Errorf("%w: the etcd leader did not answer", ErrUnreachable)
)

// ConditionReasonFor maps an observation error to the EtcdClusterHealthy reason KCP uses for
// it: ConnectionDown when etcd cannot be reached, InspectionFailed otherwise; InputTooLarge
// (ours, not KCP's) when the workload cluster answered past a bound (ErrTooLarge);
// EndpointNotAllowed (ours) when the endpoints lie outside the networks the manager may dial
// (ErrEndpointNotAllowed).
func ConditionReasonFor(err error) string {
	switch {
	case errors.Is(err, ErrTooLarge):
		return ClusterInputTooLargeReason
	case errors.Is(err, ErrEndpointNotAllowed):
		return ClusterEndpointNotAllowedReason
	case errors.Is(err, ErrUnreachable):
		return ClusterConnectionDownReason
	}
	return ClusterInspectionFailedReason
}
