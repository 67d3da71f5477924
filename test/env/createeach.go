package env

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// CreateEach calls create for 0..n-1, eight at a time, and returns the first error. Hostile
// workload clusters are thousands of objects: one at a time, creating them would take minutes.
func CreateEach(ctx context.Context, n int, create func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return create(ctx, i) })
	}
	return g.Wait()
}
