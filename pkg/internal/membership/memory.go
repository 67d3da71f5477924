package membership

import (
	"slices"
	"sync"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Memory is what a backend keeps between observations of its cluster. It is safe for
// concurrent use; the zero value is empty.
//
// Note: the cluster ID is kept for the life of the backend. A member that answers with another
// one is a stranger (for example a member whose data was wiped and that bootstrapped a cluster
// of its own), even when it is the only one that answers. Restoring etcd from a backup creates
// a new cluster ID; a provider that does so creates a new backend.
type Memory struct {
	mu        sync.Mutex
	clusterID uint64          // the cluster ID seen first
	last      []etcd.Member   // the member list the cluster's members reported last
	gone      map[uint64]bool // members a linearizable member list showed removed
}

// Recall returns the cluster ID seen first (zero before one was seen) and the member list seen
// last (nil before one was seen).
func (m *Memory) Recall() (uint64, []etcd.Member) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.clusterID, slices.Clone(m.last)
}

// Decide decides from the answers with what is remembered (see Decide), and
// remembers it.
func (m *Memory) Decide(answers []Answer) (Decision, error) {
	known, last := m.Recall()
	v, err := Decide(answers, known, last)
	if err != nil {
		return Decision{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.clusterID == 0 {
		m.clusterID = v.ClusterID
	}
	if v.ClusterID == m.clusterID {
		m.last = slices.Clone(v.Members)
	}
	return v, nil
}

// Gone reports whether a linearizable member list showed member id removed: it is never
// asked for Status again.
func (m *Memory) Gone(id uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gone[id]
}

// markGone records that a linearizable member list showed member id removed, and drops it
// from the member list kept for the next observation.
func (m *Memory) markGone(id uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone == nil {
		m.gone = map[uint64]bool{}
	}
	m.gone[id] = true
	m.last = slices.DeleteFunc(m.last, func(x etcd.Member) bool { return x.ID == id })
}
