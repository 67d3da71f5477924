package k3ssim

import (
	"context"
	"time"
)

// learnerProgress is the last applied index the leader saw for a learner, and since when.
type learnerProgress struct {
	applied uint64
	since   time.Time
}

// manageLearners is the leader's learner loop (k3s pkg/etcd/etcd.go, the learner promotion loop): a learner
// whose applied index has not advanced for LearnerStallTimeout is removed (a learner that
// never started, such as the leftover of a failed join, never advances); every other
// learner is offered MemberPromote, which etcd refuses until it has caught up
// (ErrLearnerNotReady), so the next tick tries again.
func (s *Simulator) manageLearners(ctx context.Context, members []member) {
	now := time.Now()
	learners := map[uint64]bool{}
	for _, m := range members {
		if !m.IsLearner {
			continue
		}
		learners[m.ID] = true
		if s.learnerStalled(ctx, m, now) {
			s.removeStalledLearner(ctx, m)
			continue
		}
		if err := s.etcd.promoteMember(ctx, m.ID); err != nil {
			s.log.V(4).Info("Learner not promoted yet", "memberName", m.Name, "err", err.Error())
			continue
		}
		s.log.Info("Promoted etcd learner", "memberName", m.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.learners {
		if !learners[id] {
			delete(s.learners, id)
		}
	}
}

// learnerStalled records the learner's applied index and reports whether it stood still for
// LearnerStallTimeout. A learner that does not answer counts as not advancing.
func (s *Simulator) learnerStalled(ctx context.Context, m member, now time.Time) bool {
	var applied uint64
	if len(m.ClientURLs) > 0 {
		if resp, err := s.etcd.status(ctx, m.ClientURLs[0]); err == nil {
			applied = resp.RaftAppliedIndex
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, seen := s.learners[m.ID]
	if !seen || applied > p.applied {
		s.learners[m.ID] = learnerProgress{applied: applied, since: now}
		return false
	}
	return now.Sub(p.since) >= s.opts.LearnerStallTimeout
}

// removeStalledLearner removes a learner that made no progress; its server, if simulated,
// tombstones on the next tick because its member is gone.
func (s *Simulator) removeStalledLearner(ctx context.Context, m member) {
	if err := s.etcd.removeMember(ctx, m.ID); err != nil {
		s.log.Error(err, "Failed to remove stalled etcd learner", "memberName", m.Name)
		return
	}
	s.log.Info("Removed etcd learner that made no progress", "memberName", m.Name, "stallTimeout", s.opts.LearnerStallTimeout)
}
