package main

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/test/demo"
)

func Test_parse(t *testing.T) {
	g := NewWithT(t)
	opts, err := parse([]string{"--keep-running", "--write-kubeconfig", "/tmp/kc"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(opts).To(Equal(demo.Options{KeepRunning: true, Kubeconfig: "/tmp/kc"}))

	_, err = parse([]string{"--kubeconfig", "/tmp/kc"})
	g.Expect(err).To(HaveOccurred())
}
