package soak

import (
	"context"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// sampleInterval is how often the checker reads etcd and the Machines.
const sampleInterval = 200 * time.Millisecond

// checker samples etcd's member list (read with clientv3 from the real members) and the
// Machines, and reports what etcd-adapter promises never to do:
//   - a member removed while its Machine is not deleting;
//   - the hook released (the Machine gone, or deleting without the hook) while its member is
//     still listed;
//   - quorum lost by a removal the soak did not make: fewer started voters than a majority of
//     the voters left;
//   - two MemberRemove calls that reached one member's removal (removed, or already gone).
type checker struct {
	s       *scenario
	prev    *listing
	cli     *clientv3.Client
	flagged map[string]bool
	// seen are the Machines an earlier sample listed: only a Machine seen before can be gone (a
	// join records its Machine while creating it, between a sample's listing and its checks).
	seen    map[string]bool
	samples int
}

func (k *checker) run(ctx context.Context) {
	k.flagged, k.seen = map[string]bool{}, map[string]bool{}
	defer func() {
		if k.cli != nil {
			_ = k.cli.Close()
		}
	}()
	t := time.NewTicker(sampleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			k.sample(ctx)
		}
	}
}

// listing is a member list and the members whose etcd ran while it was read.
type listing struct {
	members map[uint64]*pb.Member
	// running holds the members whose etcd ran just before or just after the list was read. A
	// member's process is read at that time, not when a check runs: etcd ends a member's process
	// once it is removed, so read later, a member the list still holds may have stopped because
	// of a removal that came after the list (a voter of the list that was running when it was
	// read would count as stopped, and a removal as losing quorum it never lost).
	running map[uint64]bool
}

// list reads the member list from a started voter; nil when none answers (quorum lost, or
// every member stopped), in which case the sample is skipped.
func (k *checker) list(ctx context.Context) *listing {
	if k.cli == nil {
		cli, err := k.s.etcd.NewClient(ctx)
		if err != nil {
			return nil
		}
		k.cli = cli
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	running := k.s.runningIDs()
	resp, err := k.cli.MemberList(cctx)
	if err != nil {
		_ = k.cli.Close()
		k.cli = nil
		return nil
	}
	for id := range k.s.runningIDs() {
		running[id] = true
	}
	out := &listing{members: map[uint64]*pb.Member{}, running: running}
	for _, m := range resp.Members {
		out.members[m.ID] = m
	}
	return out
}

func (k *checker) machines(ctx context.Context) (map[string]*clusterv1.Machine, bool) {
	list := &clusterv1.MachineList{}
	if err := k.s.c.List(ctx, list, client.InNamespace(k.s.ns)); err != nil {
		return nil, false
	}
	out := map[string]*clusterv1.Machine{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, true
}

// sample reads members (before), Machines, members (after). Deletion is one-way, so a Machine
// seen not deleting after a removal was not deleting at the removal; a member listed after the
// Machine was seen without its hook was listed while the hook was gone.
func (k *checker) sample(ctx context.Context) {
	before := k.list(ctx)
	if before == nil {
		return
	}
	ms, ok := k.machines(ctx)
	if !ok {
		return
	}
	after := k.list(ctx)
	if after == nil {
		return
	}
	k.samples++
	if k.prev != nil {
		k.checkRemovals(k.prev, before, ms)
		k.checkRemovals(before, after, ms)
	}
	k.checkHooks(after.members, ms)
	k.checkDoubleRemovals()
	k.prev = after
	for name := range ms {
		k.seen[name] = true
	}
}

func (k *checker) checkRemovals(from, to *listing, ms map[string]*clusterv1.Machine) {
	for id, gone := range from.members {
		if _, still := to.members[id]; still {
			continue
		}
		who, byWorld := k.s.worldRemovedBy(id)
		rec := k.s.machineOf(id)
		k.s.logf("  etcd: member %s/%x removed (%s)", gone.Name, id, orStr(who, "not by the soak"))
		if byWorld {
			continue
		}
		if rec != nil {
			if m, ok := ms[rec.name]; ok && m.DeletionTimestamp.IsZero() {
				k.flag("removed-needed/"+hex(id), "member %s/%x removed while its Machine %s is not deleting", gone.Name, id, rec.name)
			}
		}
		voters, started := startedVoters(to.members, to.running)
		if started < voters/2+1 {
			k.flag("quorum/"+hex(id), "quorum lost after member %s/%x was removed: %d of %d voters started", gone.Name, id, started, voters)
		}
	}
}

func (k *checker) checkHooks(listed map[uint64]*pb.Member, ms map[string]*clusterv1.Machine) {
	for id, lm := range listed {
		rec := k.s.machineOf(id)
		if rec == nil {
			continue
		}
		m, exists := ms[rec.name]
		switch {
		case !exists:
			// A Machine no sample has seen yet may still be on its way into the cache.
			if k.seen[rec.name] {
				k.flag("hook/"+rec.name, "Machine %s is gone while its member %s/%x is listed", rec.name, lm.Name, id)
			}
		case !m.DeletionTimestamp.IsZero() && m.Annotations[v1alpha1.PreTerminateHookAnnotation] == "":
			k.flag("hook/"+rec.name, "hook released from deleting Machine %s while its member %s/%x is listed", rec.name, lm.Name, id)
		}
	}
}

// checkDoubleRemovals counts, from etcd's side, the MemberRemove calls that removed a member or
// found it already gone.
func (k *checker) checkDoubleRemovals() {
	n := map[uint64]int{}
	for _, c := range k.s.etcd.MemberRemoveCalls() {
		if c.Removed || c.NotFound {
			n[c.ID]++
		}
	}
	for id, count := range n {
		if count > 1 {
			k.flag("double/"+hex(id), "member %x: %d MemberRemove calls reached its removal (removed or already gone)", id, count)
		}
	}
}

func (k *checker) flag(key, format string, args ...any) {
	if k.flagged[key] {
		return
	}
	k.flagged[key] = true
	k.s.violate(format, args...)
}

// startedVoters counts the voters of a member list and those of them in running.
func startedVoters(list map[uint64]*pb.Member, running map[uint64]bool) (voters, started int) {
	for id, m := range list {
		if m.IsLearner {
			continue
		}
		voters++
		if running[id] {
			started++
		}
	}
	return voters, started
}

// runningIDs is the set of members whose etcd runs now.
func (s *scenario) runningIDs() map[uint64]bool {
	out := map[uint64]bool{}
	for _, em := range s.etcd.Members() {
		if em.Running() {
			out[em.ID()] = true
		}
	}
	return out
}

func hex(id uint64) string { return fmt.Sprintf("%x", id) }

func orStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
