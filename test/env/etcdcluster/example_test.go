package etcdcluster_test

import (
	"context"
	"fmt"
	"time"

	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// A three-member cluster on Nodes cp-0, cp-1 and cp-2, asked for its members through one
// member, verifying the server certificate for the member's Node name.
func ExampleStart() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: etcdcluster.Nodes("cp", 3)})
	if err != nil {
		panic(err)
	}
	defer func() { _ = c.Close() }()

	m := c.MemberOnNode("cp-1")
	cfg, err := c.ClientConfig(m.ClientAddress())
	if err != nil {
		panic(err)
	}
	cli, err := etcdcluster.NewClient(ctx, etcdcluster.WithServerName(cfg, m.NodeName()))
	if err != nil {
		panic(err)
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(resp.Members), "members; answered by", m.Name())
	// Output: 3 members; answered by cp-1
}
