package k3ssim

import "context"

// leaderDuties is what only the raft leader's K3s does each tick: write EtcdIsVoter on the
// etcd Nodes (unless the condition writer was stopped) and try to promote every learner
// (k3s pkg/etcd/etcd.go: the member-status pass and the learner promotion loop).
func (s *Simulator) leaderDuties(ctx context.Context, members []member) {
	leaderID, err := s.etcd.leaderID(ctx, members)
	if err != nil {
		s.log.Error(err, "No etcd leader, skipping leader duties")
		return
	}
	leader, ok := s.leaderServer(leaderID, members)
	if !ok {
		return
	}
	s.conditionPass(ctx, members, leader.profile)
	if !s.PromotionHeld() {
		s.manageLearners(ctx, members)
	}
}

// leaderServer returns the running simulated server whose member leads.
func (s *Simulator) leaderServer(leaderID uint64, members []member) (server, bool) {
	for _, m := range members {
		if m.ID != leaderID {
			continue
		}
		srv, ok := s.serverForMember(m.Name)
		return srv, ok && srv.running
	}
	return server{}, false
}

// conditionPass runs one EtcdIsVoter pass unless the writer is stopped. condMu makes
// StopConditionWriter wait for a pass in flight.
func (s *Simulator) conditionPass(ctx context.Context, members []member, p Profile) {
	s.condMu.Lock()
	defer s.condMu.Unlock()
	if !s.ConditionWriterRunning() {
		return
	}
	if err := s.writeVoterConditions(ctx, members, p); err != nil {
		s.log.Error(err, "Failed to write EtcdIsVoter conditions")
	}
}

// StopConditionWriter stops the leader's EtcdIsVoter writes (fault: the heartbeat goes
// stale); learner promotion goes on. It returns after a pass in flight has finished, so no
// write happens after it returns.
func (s *Simulator) StopConditionWriter() {
	s.setConditionWriter(false)
	s.condMu.Lock()
	defer s.condMu.Unlock()
}

// StartConditionWriter resumes the leader's EtcdIsVoter writes.
func (s *Simulator) StartConditionWriter() { s.setConditionWriter(true) }

// ConditionWriterRunning reports whether the leader writes EtcdIsVoter.
func (s *Simulator) ConditionWriterRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conditionWriter
}

func (s *Simulator) setConditionWriter(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conditionWriter = on
}

// StopConditionWriterFor stops the leader's EtcdIsVoter writes on one Node only (fault: that
// Node's heartbeat goes stale while its member runs); StartConditionWriterFor resumes them.
func (s *Simulator) StopConditionWriterFor(node string) {
	s.mu.Lock()
	s.hiddenNodes[node] = true
	s.mu.Unlock()
	s.condMu.Lock()
	defer s.condMu.Unlock()
}

// StartConditionWriterFor resumes the leader's EtcdIsVoter writes on node.
func (s *Simulator) StartConditionWriterFor(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.hiddenNodes, node)
}

func (s *Simulator) conditionHidden(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hiddenNodes[node]
}
