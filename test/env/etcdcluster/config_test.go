package etcdcluster

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func Test_endCallOnPanic(t *testing.T) {
	tests := []struct {
		name     string
		handler  func(context.Context, any) (any, error)
		wantResp any
		wantCode codes.Code
	}{
		{
			name:     "a handler that panics is answered Unavailable, as a member whose process ended",
			handler:  func(context.Context, any) (any, error) { panic("tx closed") },
			wantCode: codes.Unavailable,
		},
		{
			name:     "a handler that returns is answered with what it returned",
			handler:  func(context.Context, any) (any, error) { return "ok", nil },
			wantResp: "ok",
			wantCode: codes.OK,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			resp, err := endCallOnPanic(context.Background(), nil, nil, tt.handler)
			g.Expect(status.Code(err)).To(Equal(tt.wantCode))
			if tt.wantResp == nil {
				g.Expect(resp).To(BeNil())
			} else {
				g.Expect(resp).To(Equal(tt.wantResp))
			}
		})
	}
}
