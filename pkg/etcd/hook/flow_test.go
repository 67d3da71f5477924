package hook_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func healthyCluster(n int) (*etcd.Snapshot, []etcd.Machine) { return fake.HealthyCluster(n, now) }

// withdrawing is a backend whose removal requests outlive the call, as K3s's do.
type withdrawing struct {
	*fake.Cluster
	withdrawn []etcd.Member
}

func (w *withdrawing) WithdrawRemoval(_ context.Context, m etcd.Member) error {
	w.withdrawn = append(w.withdrawn, m)
	return nil
}

// provider plays the provider's side: it keeps its Machines' annotations and patches them as
// its PatchFunc would on the apiserver.
type provider struct {
	machines map[string]*hook.MachineState
	patches  int
}

func newProvider(machines []etcd.Machine, deleting string, extra ...string) *provider {
	p := &provider{machines: map[string]*hook.MachineState{}}
	for _, m := range machines {
		st := &hook.MachineState{Machine: m, Annotations: map[string]string{k3sHook.Key: k3sHook.Value}}
		if m.Name == deleting {
			st.Deleting, st.DeletingReason = true, hook.WaitingForPreTerminateHookReason
			for _, k := range extra {
				st.Annotations[k] = ""
			}
		}
		p.machines[m.Name] = st
	}
	return p
}

func (p *provider) patch(_ context.Context, machine string, set map[string]string, remove []string) error {
	p.patches++
	m := p.machines[machine]
	maps.Copy(m.Annotations, set)
	for _, k := range remove {
		delete(m.Annotations, k)
	}
	return nil
}

func (p *provider) state(name string) hook.MachineState {
	m := *p.machines[name]
	m.Annotations = maps.Clone(m.Annotations)
	return m
}

func TestFlow_scaleDownOfTheLeader(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	snapshot, machines := healthyCluster(3)
	backend := &fake.Cluster{ObserveResponse: snapshot, ApplyChanges: true, MoveLeaderResponse: etcd.LeaderMove{Outcome: etcd.LeaderMoved}}
	backup := hook.PreTerminateHookPrefix + "/backup"
	p := newProvider(machines, "m-cp-0", backup)
	machines[0].Deleting = true
	f := hook.Flow{Hook: k3sHook, Cluster: backend, Patch: p.patch, ControlPlane: hook.ControlPlane{Kind: "KThreesControlPlane"}, Machines: machines, Now: now}

	var phases []hook.Phase
	for range 6 {
		if _, ok := p.machines["m-cp-0"].Annotations[backup]; ok && len(phases) == 1 {
			// Note: the other hook's owner releases it, as Cluster API expects of every hook.
			delete(p.machines["m-cp-0"].Annotations, backup)
		}
		o, err := f.Step(ctx, p.state("m-cp-0"))
		g.Expect(err).NotTo(HaveOccurred())
		phases = append(phases, o.Phase)
		if o.Done() {
			break
		}
	}
	g.Expect(phases).To(Equal([]hook.Phase{hook.PhaseWaitingForHooks, hook.PhaseLeaderMoved, hook.PhaseRemoving, hook.PhaseReleased}))
	g.Expect(backend.MovedLeader).To(HaveLen(1))
	g.Expect(backend.MovedLeader[0][0].Name).To(Equal("cp-0"))
	g.Expect(backend.RemovedMembers).To(Equal([]etcd.Member{snapshot.Members[0]}))
	g.Expect(p.machines["m-cp-0"].Annotations).NotTo(HaveKey(k3sHook.Key))
	g.Expect(p.machines["m-cp-1"].Annotations).To(HaveKey(k3sHook.Key))
	after, _ := backend.Observe(ctx)
	g.Expect(after.Members).To(HaveLen(2))
}

func TestFlow_rejectedKeepsTheHookUntilARetry(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	snapshot, machines := healthyCluster(3)
	backend := &withdrawing{Cluster: &fake.Cluster{ObserveResponse: snapshot, ApplyChanges: true,
		RemoveMemberResponses: map[uint64]etcd.Removal{2: {State: etcd.RemovalRejected, Reason: "etcdserver: re-configuration failed due to not enough started members"}}}}
	p := newProvider(machines, "m-cp-1")
	machines[1].Deleting = true
	f := hook.Flow{Hook: k3sHook, Cluster: backend, Patch: p.patch, Machines: machines, Now: now}

	o, err := f.Step(ctx, p.state("m-cp-1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Phase).To(Equal(hook.PhaseRejected))
	g.Expect(o.Message).To(ContainSubstring("not enough started members"))
	g.Expect(p.machines["m-cp-1"].Annotations).To(HaveKeyWithValue(hook.RemovalRejectedAnnotation, ContainSubstring("not enough started members")))

	// A rejected removal is not asked again, and the hook stays.
	o, err = f.Step(ctx, p.state("m-cp-1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Phase).To(Equal(hook.PhaseRejected))
	g.Expect(o.Message).To(ContainSubstring(hook.RetryRemovalAnnotation))
	g.Expect(backend.RemovedMembers).To(HaveLen(1))
	g.Expect(p.machines["m-cp-1"].Annotations).To(HaveKey(k3sHook.Key))

	// A retry withdraws the stopped request and clears the record.
	p.machines["m-cp-1"].Annotations[hook.RetryRemovalAnnotation] = hook.AnnotationTrue
	delete(backend.RemoveMemberResponses, 2) // the person fixed the cause
	o, err = f.Step(ctx, p.state("m-cp-1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Phase).To(Equal(hook.PhaseRetried))
	g.Expect(backend.withdrawn).To(Equal([]etcd.Member{snapshot.Members[1]}))
	g.Expect(p.machines["m-cp-1"].Annotations).NotTo(HaveKey(hook.RemovalRejectedAnnotation))
	g.Expect(p.machines["m-cp-1"].Annotations).NotTo(HaveKey(hook.RetryRemovalAnnotation))

	// The new attempt removes the member and releases the hook.
	o, err = f.Step(ctx, p.state("m-cp-1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Phase).To(Equal(hook.PhaseRemoving))
	o, err = f.Step(ctx, p.state("m-cp-1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Phase).To(Equal(hook.PhaseReleased))
	g.Expect(backend.RemovedMembers).To(HaveLen(2))
}

func TestFlow_step(t *testing.T) {
	tests := []struct {
		name        string
		members     int
		cpDeleting  bool
		change      func(s *etcd.Snapshot, b *fake.Cluster, p *provider)
		wantPhase   hook.Phase
		wantMessage string
		wantHook    bool
		wantErr     bool
	}{
		{name: "removing a healthy member next to a broken one would lose quorum: blocked, the hook stays", members: 3,
			change: func(s *etcd.Snapshot, _ *fake.Cluster, _ *provider) {
				s.Evidence[2] = etcd.MemberEvidence{MemberID: 3, NodeName: "cp-2", Contact: etcd.ContactUnreachable, Error: "connection refused", ObservedAt: now}
			},
			wantPhase: hook.PhaseBlocked, wantMessage: "not safe now", wantHook: true},
		{name: "the last member is never removed", members: 1, wantPhase: hook.PhaseBlocked, wantMessage: "last etcd member", wantHook: true},
		{name: "the last Machine of a control plane being deleted is released without a removal", members: 1, cpDeleting: true,
			wantPhase: hook.PhaseReleased, wantMessage: "being deleted"},
		{name: "etcd not observed: blocked", members: 3,
			change: func(_ *etcd.Snapshot, b *fake.Cluster, _ *provider) {
				b.ObserveResponse, b.ObserveError = nil, etcd.ErrUnreachable
			},
			wantPhase: hook.PhaseBlocked, wantMessage: "could not be observed", wantHook: true},
		{name: "still draining: waits", members: 3,
			change: func(_ *etcd.Snapshot, _ *fake.Cluster, p *provider) {
				p.machines["m-cp-1"].DeletingReason = "DrainingNode"
			},
			wantPhase: hook.PhaseWaitingForDrain, wantMessage: "drain", wantHook: true},
		{name: "a person releases the hook without a removal", members: 3,
			change: func(_ *etcd.Snapshot, _ *fake.Cluster, p *provider) {
				p.machines["m-cp-1"].Annotations[hook.ReleaseHookAnnotation] = hook.AnnotationTrue
			},
			wantPhase: hook.PhaseReleased, wantMessage: "released by annotation"},
		{name: "release-hook=false releases nothing", members: 3,
			change: func(_ *etcd.Snapshot, _ *fake.Cluster, p *provider) {
				p.machines["m-cp-1"].Annotations[hook.ReleaseHookAnnotation] = "false"
				p.machines["m-cp-1"].DeletingReason = "DrainingNode"
			},
			wantPhase: hook.PhaseWaitingForDrain, wantHook: true},
		{name: "a failed removal call is an error, retried on the next step", members: 3,
			change:    func(_ *etcd.Snapshot, b *fake.Cluster, _ *provider) { b.RemoveMemberError = etcd.ErrUnreachable },
			wantPhase: hook.PhaseRemoving, wantMessage: "retrying", wantHook: true, wantErr: true},
		{name: "a removal in progress keeps the hook", members: 3,
			change: func(_ *etcd.Snapshot, b *fake.Cluster, _ *provider) {
				b.RemoveMemberResponses = map[uint64]etcd.Removal{2: {State: etcd.RemovalInProgress, Reason: "waiting for K3s"}}
			},
			wantPhase: hook.PhaseRemoving, wantMessage: "waiting for K3s", wantHook: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			snapshot, machines := healthyCluster(tt.members)
			deleting := machines[len(machines)-1].Name
			if tt.members > 1 {
				deleting = "m-cp-1"
			}
			backend := &fake.Cluster{ObserveResponse: snapshot, ApplyChanges: true}
			p := newProvider(machines, deleting)
			if tt.change != nil {
				tt.change(snapshot, backend, p)
			}
			f := hook.Flow{Hook: k3sHook, Cluster: backend, Patch: p.patch, Machines: machines, Now: now, ControlPlaneDeleting: tt.cpDeleting}
			o, err := f.Step(context.Background(), p.state(deleting))
			g.Expect(err != nil).To(Equal(tt.wantErr), fmt.Sprint(err))
			g.Expect(o.Phase).To(Equal(tt.wantPhase), o.Message)
			g.Expect(o.Message).To(ContainSubstring(tt.wantMessage))
			if tt.wantHook {
				g.Expect(p.machines[deleting].Annotations).To(HaveKey(k3sHook.Key))
			} else {
				g.Expect(p.machines[deleting].Annotations).NotTo(HaveKey(k3sHook.Key))
			}
			if tt.wantPhase != hook.PhaseRemoving {
				g.Expect(backend.RemovedMembers).To(BeEmpty())
			}
			g.Expect(errors.Is(err, etcd.ErrUnreachable) || err == nil).To(BeTrue())
		})
	}
}
