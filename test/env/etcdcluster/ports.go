package etcdcluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Ports are drawn below Linux's ephemeral range (32768-60999 by default). Important! A port
// in the ephemeral range can be taken as the local end of any outgoing connection while its
// member is stopped, and then Restart could not bind it again; ports below the range are only
// ever bound on purpose.
const (
	portRangeStart = 20000
	portRangeEnd   = 32000
)

// portAllocator hands out ports that are free now and never hands out the same port twice
// in this process, so that clusters running in parallel in one test binary cannot collide.
type portAllocator struct {
	mu   sync.Mutex
	used map[int]bool
}

var ports = &portAllocator{used: map[int]bool{}}

// allocate returns a port on ip that nothing listens on and that this process never handed
// out before.
func (a *portAllocator) allocate(ip string) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range 1000 {
		port := portRangeStart + rand.IntN(portRangeEnd-portRangeStart)
		if a.used[port] || !isFree(ip, port) {
			continue
		}
		a.used[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("failed to find a free port on %s in [%d,%d)", ip, portRangeStart, portRangeEnd)
}

// isFree reports whether port can be bound on ip right now.
func isFree(ip string, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	return l.Close() == nil
}
