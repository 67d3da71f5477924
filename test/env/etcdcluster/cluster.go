package etcdcluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
	"go.etcd.io/etcd/server/v3/embed"
)

// Cluster is a running etcd cluster. Its methods are safe for concurrent use.
type Cluster struct {
	settings *settings

	mu        sync.Mutex
	members   []*Member
	separates []*Cluster
	closed    bool
}

// Start starts a cluster with the given members and waits until every member serves
// clients. On error, everything already started is closed.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	for _, m := range c.members {
		m.initialCluster = c.initialCluster()
		m.clusterState = embed.ClusterStateFlagNew
	}
	if err := c.startAll(ctx); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// newCluster prepares the directory, certificates and ports of a cluster without starting it.
func newCluster(opts Options) (*Cluster, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cluster{settings: &settings{
		ca: opts.CA, token: randomToken(), tickMs: opts.TickMs, electionMs: opts.ElectionMs,
		quotaBackendBytes: opts.QuotaBackendBytes, looseReconfig: opts.DisableStrictReconfigCheck, removes: &removeLog{},
		binary: opts.Binary,
	}}
	if opts.Binary != "" {
		c.settings.wantVersion = os.Getenv(VersionEnvVar)
	}
	if err := c.prepare(opts); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// prepare creates the temporary directory, the CA file, the client certificate and members.
func (c *Cluster) prepare(opts Options) error {
	dir, err := os.MkdirTemp(opts.Dir, "etcdcluster-")
	if err != nil {
		return fmt.Errorf("failed to create cluster directory: %w", err)
	}
	c.settings.dir = dir
	c.settings.caFile = filepath.Join(dir, "ca.crt")
	if err := pki.WritePEM(c.settings.caFile, opts.CA.CertPEM()); err != nil {
		return err
	}
	if c.settings.client, err = opts.CA.NewClientCert(pki.KCPClientCommonName); err != nil {
		return fmt.Errorf("failed to issue etcd client certificate: %w", err)
	}
	for _, spec := range opts.Members {
		m, err := newMember(c.settings, spec)
		if err != nil {
			return err
		}
		c.members = append(c.members, m)
	}
	return nil
}

// randomToken makes the initial cluster token unique, so that two clusters never share a
// cluster ID even if they had the same peer URLs.
func randomToken() string {
	return "etcdcluster-" + rand.Text()[:10]
}

// initialCluster renders etcd's --initial-cluster from the members.
func (c *Cluster) initialCluster() string {
	parts := make([]string, 0, len(c.members))
	for _, m := range c.members {
		parts = append(parts, m.Name()+"="+m.PeerURL())
	}
	return strings.Join(parts, ",")
}

// startAll starts every member and waits until all are ready.
// Note: members are started one after the other on purpose. A starting member asks each peer
// whether it was bootstrapped already, with a one-second timeout; a peer whose listener is
// bound but not yet serving makes it wait that full second, while a peer not yet listening
// refuses at once and one that serves answers at once. Starting in sequence avoids the wait.
// Readiness needs a quorum, so it is awaited only once all have started.
func (c *Cluster) startAll(ctx context.Context) error {
	for _, m := range c.members {
		if err := m.start(); err != nil {
			return err
		}
	}
	errs := make([]error, len(c.members))
	var wg sync.WaitGroup
	for i, m := range c.members {
		wg.Go(func() { errs[i] = m.waitReady(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// CA returns the CA that signed every certificate of the cluster.
func (c *Cluster) CA() *pki.CA { return c.settings.ca }

// Dir returns the cluster's temporary directory, removed by Close.
func (c *Cluster) Dir() string { return c.settings.dir }

// Members returns the members, in start order, including stopped and wiped ones.
func (c *Cluster) Members() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Member(nil), c.members...)
}

// Member returns the member with the given member name, or nil.
func (c *Cluster) Member(name string) *Member {
	for _, m := range c.Members() {
		if m.Name() == name {
			return m
		}
	}
	return nil
}

// MemberOnNode returns the member hosted by the given Node, or nil.
func (c *Cluster) MemberOnNode(nodeName string) *Member {
	for _, m := range c.Members() {
		if m.NodeName() == nodeName {
			return m
		}
	}
	return nil
}

// Close stops every member and every separate cluster started from this one, and removes
// the temporary directories. It is safe to call more than once.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	members, separates := c.members, c.separates
	c.mu.Unlock()

	var errs []error
	for _, s := range separates {
		errs = append(errs, s.Close())
	}
	// Kill, not Stop: a graceful leader hands leadership to a peer that is closing too and
	// waits for it until etcd's request timeout, seconds per cluster for nothing.
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() { _ = m.Kill() })
	}
	wg.Wait()
	if c.settings.dir != "" {
		errs = append(errs, os.RemoveAll(c.settings.dir))
	}
	return errors.Join(errs...)
}
