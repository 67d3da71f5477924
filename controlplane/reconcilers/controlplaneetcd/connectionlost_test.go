package controlplaneetcd

import (
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestConnectionLost_Notify(t *testing.T) {
	g := NewWithT(t)
	c := NewConnectionLost()
	key := client.ObjectKey{Namespace: "ns", Name: "c1"}

	c.Notify(key)
	e := <-c.events
	g.Expect(e.Object.GetNamespace()).To(Equal("ns"))
	g.Expect(e.Object.GetName()).To(Equal("c1"))

	t.Log("a full buffer drops the wake-up instead of blocking the caller")
	for range connectionLostBuffer + 10 {
		c.Notify(key)
	}
	g.Expect(c.events).To(HaveLen(connectionLostBuffer))
}
