package etcdcluster

import (
	"context"
	"errors"
	"fmt"
)

// AddDuplicate leaves behind what a reused hostname does when the Node's old member was never
// removed: a second voting member named like the member on nodeName, with its own peer URL,
// that joined, published its name, and does not run any more. The member on nodeName keeps
// running, and MemberOnNode still returns it. It returns the duplicate, killed.
func (c *Cluster) AddDuplicate(ctx context.Context, nodeName string) (*Member, error) {
	orig := c.MemberOnNode(nodeName)
	if orig == nil {
		return nil, fmt.Errorf("failed to add a duplicate of the member on Node %s: no such member", nodeName)
	}
	spec := orig.spec
	m, err := newMemberIn(c.settings, spec, fmt.Sprintf("%s-old-%d", spec.MemberName, len(c.Members())))
	if err != nil {
		return nil, err
	}
	if err := c.startAsLearner(ctx, m, spec.MemberName); err != nil {
		return nil, err
	}
	if err := c.promote(ctx, m); err != nil {
		return nil, errors.Join(err, m.Kill())
	}
	return m, m.Kill()
}

// newMemberIn is newMember with its own directory name, for a member whose name is in use.
func newMemberIn(s *settings, spec MemberSpec, dirName string) (*Member, error) {
	// The directory (and so the certificates, issued for the Node) is named after dirName.
	m, err := newMember(s, MemberSpec{NodeName: spec.NodeName, MemberName: dirName, IP: spec.IP})
	if err != nil {
		return nil, err
	}
	m.spec = spec
	return m, nil
}
