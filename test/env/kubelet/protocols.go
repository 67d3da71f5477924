package kubelet

import (
	"maps"
	"net/http"
	"strings"

	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// SPDYProtocol is how PortForwardProtocols names a port-forward the apiserver brought to the
// kubelet as a SPDY upgrade.
const SPDYProtocol = "spdy"

// protocolOf names the protocol of a port-forward request as it reached the kubelet:
// "websocket:<subprotocols asked>" for a WebSocket upgrade, SPDYProtocol otherwise. This is
// what the apiserver negotiated on the caller's behalf: it passes a WebSocket upgrade through to
// the kubelet as it is, translates KEP-4006's SPDY-over-WebSocket tunnel into SPDY, and passes
// SPDY through (k8s.io/kubernetes pkg/registry/core/pod/rest/subresources.go, PortForwardREST).
func protocolOf(req *http.Request) string {
	if wsstream.IsWebSocketRequest(req) {
		return "websocket:" + strings.Join(req.Header.Values("Sec-WebSocket-Protocol"), ",")
	}
	return SPDYProtocol
}

// recordProtocol counts a port-forward request by protocolOf.
func (k *Kubelet) recordProtocol(req *http.Request) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.protocols == nil {
		k.protocols = map[string]int{}
	}
	k.protocols[protocolOf(req)]++
}

// PortForwardProtocols counts the port-forward requests that reached this kubelet by protocol
// (see protocolOf), whatever became of them.
func (k *Kubelet) PortForwardProtocols() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.protocols)
}
