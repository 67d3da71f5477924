package external

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcd-adapter/etcd-adapter/internal/etcdrpc"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Why an endpoint did not answer, in words a workload cluster's admins may read. The endpoints
// asked may include client URLs a member list reports on an etcd Machine's address, and the
// endpoints themselves are written by people who may be the workload cluster's admins: the raw
// dial error ("dial tcp 10.0.3.7:443:
// connect: no route to host", a TLS alert from another service, a DNS answer) would tell them
// about the management cluster's network through the status and Events they can read. The raw
// error goes to the manager's log only.
const (
	classUnreachable = "unreachable"
	classTLSFailed   = "TLS failed"
	classRefused     = "refused"
	classTooLarge    = "answered with more than etcd-adapter reads"
	classNotAllowed  = "not in the networks etcd-adapter may dial"
)

// endpointError is why one endpoint did not answer: its Error says the endpoint and the class
// only; it unwraps to the etcd error class (and the raw error is logged where it is made).
type endpointError struct {
	endpoint string
	class    string
	kind     error
}

func (e *endpointError) Error() string { return fmt.Sprintf("etcd at %s: %s", e.endpoint, e.class) }
func (e *endpointError) Unwrap() error { return e.kind }

// classify returns the tenant-readable error for err from endpoint ep and logs err itself. An
// error already classified is returned as it is.
func (b *Backend) classify(ctx context.Context, ep, what string, err error) error {
	var ee *endpointError
	if errors.As(err, &ee) {
		return err
	}
	class, kind := errorClass(err)
	b.logger(ctx).V(2).Info("etcd endpoint did not answer", "endpoint", ep, "call", what, "class", class, "err", err.Error())
	return &endpointError{endpoint: ep, class: class, kind: kind}
}

// errorClass sorts err into a class and the etcd error class it wraps: a TLS failure is a
// configuration problem (etcd.ErrInvalidInput, as noAnswerError reports it when every endpoint
// fails so), a message past etcd.MaxResponseBytes is etcd.ErrTooLarge, an address outside the
// allowed networks is etcd.ErrEndpointNotAllowed, the rest is
// etcd.ErrUnreachable.
func errorClass(err error) (string, error) {
	var certErr *tls.CertificateVerificationError
	var alert tls.AlertError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case errors.Is(err, etcd.ErrTooLarge), status.Code(err) == codes.ResourceExhausted:
		return classTooLarge, etcd.ErrTooLarge
	case errors.Is(err, etcd.ErrEndpointNotAllowed):
		return classNotAllowed, etcd.ErrEndpointNotAllowed
	case errors.As(err, &certErr), errors.As(err, &alert), errors.As(err, &unknownAuthority), errors.As(err, &hostname), isTLSText(err):
		return classTLSFailed, etcd.ErrUnreachable
	case errors.Is(err, syscall.ECONNREFUSED), strings.Contains(err.Error(), "connection refused"):
		return classRefused, etcd.ErrUnreachable
	}
	return classUnreachable, etcd.ErrUnreachable
}

// isTLSText recognises a failed TLS handshake in gRPC's error text: gRPC reports it as
// Unavailable with the handshake's cause in the message only.
func isTLSText(err error) bool {
	s := err.Error()
	return strings.Contains(s, "x509:") || strings.Contains(s, "tls:") || strings.Contains(s, "authentication handshake failed")
}

// isTLSFailure reports whether err is an endpoint's failed TLS handshake.
func isTLSFailure(err error) bool {
	var ee *endpointError
	return errors.As(err, &ee) && ee.class == classTLSFailed
}

// rpcError is the tenant-readable form of a failed call to the member at ep: etcd's own answer
// ("etcdserver: ...") is the member's word, kept as one bounded line; anything else (the
// connection failed) is classified.
func (b *Backend) rpcError(ctx context.Context, ep, what string, err error) error {
	// An answer past etcd.MaxResponseBytes is refused by the client with ResourceExhausted,
	// which IsEtcdAnswer counts as etcd's own word.
	if status.Code(err) != codes.ResourceExhausted && etcdrpc.IsEtcdAnswer(err) {
		return fmt.Errorf("etcd at %s answered %s: %s", ep, what, etcd.SanitizeText(etcdMessage(err), etcd.MaxTextBytes))
	}
	return b.classify(ctx, ep, what, err)
}

// etcdMessage is the message etcd answered with, without gRPC's "rpc error: code = ..." prefix.
func etcdMessage(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}
