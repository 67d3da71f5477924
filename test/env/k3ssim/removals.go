package k3ssim

import "slices"

// MemberRemovals returns the names of the members the member controller removed from etcd
// (each successful MemberRemove it made), in order. A remove request for a member already gone
// counts as done in K3s and removes nothing, so it is not listed.
func (s *Simulator) MemberRemovals() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.removals)
}

func (s *Simulator) countRemoval(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removals = append(s.removals, name)
}
