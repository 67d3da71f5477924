package kubeadm

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func Test_closedUnderneath(t *testing.T) {
	closing := status.Error(codes.Canceled, "grpc: the client connection is closing")
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"A client closed by another caller while the call ran is worth a new connection", context.Background(), closing, true},
		{"It is recognised wrapped", context.Background(), fmt.Errorf("etcd on Node cp-0 did not answer: %w", closing), true},
		{"A call cancelled by its own caller is not", ended, closing, false},
		{"A call timeout is not (the connection may be dead)", context.Background(), status.Error(codes.DeadlineExceeded, "context deadline exceeded"), false},
		{"An unavailable member is not", context.Background(), status.Error(codes.Unavailable, "connection refused"), false},
		{"No error is not", context.Background(), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(closedUnderneath(tt.ctx, tt.err)).To(Equal(tt.want))
		})
	}
}
