package k3ssim

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

func Test_annotationPath(t *testing.T) {
	g := NewWithT(t)
	g.Expect(annotationPath("etcd.k3s.cattle.io/remove")).To(Equal("/metadata/annotations/etcd.k3s.cattle.io~1remove"))
	g.Expect(annotationPath("a~b/c")).To(Equal("/metadata/annotations/a~0b~1c"))
}

func Test_isRejection(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"etcd's not enough started members", fmt.Errorf("failed to remove etcd member 1: %w", rpctypes.ErrMemberNotEnoughStarted), true},
		{"the same error as text from the wire", errors.New("etcdserver: re-configuration failed due to not enough started members"), true},
		{"the leader-aware rejection", errNoOtherVoter, true},
		{"an unhealthy cluster is an ordinary error", rpctypes.ErrUnhealthy, false},
		{"a timeout is an ordinary error", errors.New("context deadline exceeded"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(isRejection(tt.err)).To(Equal(tt.want))
		})
	}
}

func Test_memberNamePattern(t *testing.T) {
	g := NewWithT(t)
	g.Expect(memberNamePattern.FindStringSubmatch("cp-0-1a2b3c4d")).To(Equal([]string{"cp-0-1a2b3c4d", "cp-0"}))
	g.Expect(memberNamePattern.FindStringSubmatch("cp-0")).To(BeNil())
	name, err := newMemberName("cp-7")
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(memberNamePattern.FindStringSubmatch(name)).To(Equal([]string{name, "cp-7"}))
}
