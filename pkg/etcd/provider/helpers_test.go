package provider_test

import (
	"time"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func healthyCluster(n int) (*etcd.Snapshot, []etcd.Machine) { return fake.HealthyCluster(n, now) }

func breakMember(s *etcd.Snapshot, i int) { fake.Unreachable(s, i) }
