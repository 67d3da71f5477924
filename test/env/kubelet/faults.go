package kubelet

import (
	"net"
)

// Retarget points port-forwards of port to address from now on, e.g. an etcd Pod's 2379 to the
// member of a separate cluster (split brain). Forwarded connections that are open are closed,
// so clients reconnect and reach the new target, as if the process behind the port changed.
func (k *Kubelet) Retarget(port int32, address string) {
	k.mu.Lock()
	k.targets[port] = address
	k.mu.Unlock()
	k.closeForwards()
}

// target returns the address port is forwarded to.
func (k *Kubelet) target(port int32) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	a, ok := k.targets[port]
	return a, ok
}

// Break makes port-forward refuse (HTTP 503, which the apiserver passes to the client as a
// failed upgrade) and closes every open connection to the kubelet port, while the Node stays
// Ready: a kubelet that is up but cannot reach its containers.
func (k *Kubelet) Break() {
	k.mu.Lock()
	k.broken = true
	k.mu.Unlock()
	k.closeConns()
}

// Repair undoes Break.
func (k *Kubelet) Repair() {
	k.mu.Lock()
	k.broken = false
	k.mu.Unlock()
}

// isBroken reports whether Break is in effect.
func (k *Kubelet) isBroken() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.broken
}

// trackForward records an open forwarded connection until the returned func is called.
func (k *Kubelet) trackForward(c net.Conn) (untrack func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.forwards[c] = struct{}{}
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		delete(k.forwards, c)
	}
}

// closeForwards closes every open forwarded connection.
func (k *Kubelet) closeForwards() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for c := range k.forwards {
		_ = c.Close()
	}
}

// PortForwards reports how many port-forward streams were asked of this kubelet so far, the
// ones whose target refused included: how often a client dialled through it.
func (k *Kubelet) PortForwards() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.portForwards
}

func (k *Kubelet) countPortForward() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.portForwards++
}
