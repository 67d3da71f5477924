package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Fragmenter returns a function that leaves about 6 MiB of free pages in every member's
// database: it writes 24 values of 256 KiB, deletes them and compacts, as the kube-apiserver
// deletes objects and compacts old revisions (k8s.io/apiserver pkg/storage/etcd3/compact.go).
func Fragmenter(c *Cluster) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		cli, err := c.NewClient(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = cli.Close() }()
		value := strings.Repeat("f", 256<<10)
		for i := range 24 {
			if _, err := cli.Put(ctx, fmt.Sprintf("/registry/fragment/%d", i), value); err != nil {
				return fmt.Errorf("failed to write: %w", err)
			}
		}
		resp, err := cli.Delete(ctx, "/registry/fragment/", clientv3.WithPrefix())
		if err != nil {
			return fmt.Errorf("failed to delete: %w", err)
		}
		if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
			return fmt.Errorf("failed to compact: %w", err)
		}
		// etcd computes dbSizeInUse when its backend commits, and the other members compact on
		// their own time: small writes for a second make each commit after its compaction.
		for i := range 20 {
			if _, err := cli.Put(ctx, "/registry/fragment-done", fmt.Sprint(i)); err != nil {
				return fmt.Errorf("failed to write: %w", err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		return nil
	}
}
