package etcdcluster

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// retryInterval is how often a membership change is retried while etcd says "not yet".
const retryInterval = 100 * time.Millisecond

// retryWhile calls fn until it succeeds, fails with an error that retryable rejects, or ctx
// ends.
func retryWhile(ctx context.Context, retryable func(error) bool, fn func() error) error {
	for {
		err := fn()
		if err == nil || !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, context.Cause(ctx))
		case <-time.After(retryInterval):
		}
	}
}

// isUnhealthy reports etcd's strict reconfiguration refusal: the member that received the
// request has not been connected to a quorum for HealthInterval (5 s), as in any cluster that
// just started or just had a member restarted.
func isUnhealthy(err error) bool {
	return errors.Is(err, rpctypes.ErrUnhealthy) || strings.Contains(err.Error(), rpctypes.ErrGRPCUnhealthy.Error())
}

// isLearnerNotReady reports etcd's "learner not in sync with leader" refusal.
func isLearnerNotReady(err error) bool {
	return errors.Is(err, rpctypes.ErrMemberLearnerNotReady) ||
		strings.Contains(err.Error(), rpctypes.ErrGRPCLearnerNotReady.Error())
}
