package k3ssim

// HoldPromotion stops the leader's learner loop (fault: a learner stays a learner, as when it
// cannot catch up): no learner is promoted, and none is removed as stalled, until
// ReleasePromotion. EtcdIsVoter keeps reporting MemberIsLearner meanwhile.
func (s *Simulator) HoldPromotion() { s.setPromotionHeld(true) }

// ReleasePromotion resumes the leader's learner loop.
func (s *Simulator) ReleasePromotion() { s.setPromotionHeld(false) }

// PromotionHeld reports whether HoldPromotion is in effect.
func (s *Simulator) PromotionHeld() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.promotionHeld
}

func (s *Simulator) setPromotionHeld(held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.promotionHeld = held
}
