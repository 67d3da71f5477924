package hook_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

var k3sHook = hook.Hook{Key: hook.PreTerminateHookPrefix + "/k3s-etcd", Value: "k3s"}

func TestMayAct(t *testing.T) {
	backup := hook.PreTerminateHookPrefix + "/backup"
	state := func(deleting bool, reason string, keys ...string) hook.MachineState {
		a := map[string]string{}
		for _, k := range keys {
			a[k] = ""
		}
		return hook.MachineState{Machine: etcd.Machine{Name: "m-cp-0", NodeName: "cp-0", Deleting: deleting}, Annotations: a, DeletingReason: reason}
	}
	drained := hook.WaitingForPreTerminateHookReason
	tests := []struct {
		name    string
		m       hook.MachineState
		act     bool
		phase   hook.Phase
		waiting []string
	}{
		{"without its hook it does nothing", state(true, drained), false, hook.PhaseNotHeld, nil},
		{"a Machine not deleting", state(false, "", k3sHook.Key), false, hook.PhaseNotDeleting, nil},
		{"while Cluster API drains", state(true, "DrainingNode", k3sHook.Key), false, hook.PhaseWaitingForDrain, nil},
		{"while the Deleting condition is not there yet", state(true, "", k3sHook.Key), false, hook.PhaseWaitingForDrain, nil},
		{"drained with another hook left", state(true, drained, k3sHook.Key, backup), false, hook.PhaseWaitingForHooks, []string{backup}},
		{"drained with the manager's hook left: it goes first", state(true, drained, k3sHook.Key, hook.ManagerHookKey), false, hook.PhaseWaitingForHooks, []string{hook.ManagerHookKey}},
		{"drained with only a run-last hook left", state(true, drained, k3sHook.Key, hook.RKE2HookKey), true, hook.PhaseReady, nil},
		{"drained and alone", state(true, drained, k3sHook.Key), true, hook.PhaseReady, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := hook.MayAct(tt.m, k3sHook, hook.ControlPlane{Kind: "KThreesControlPlane"})
			g.Expect(r.Act).To(Equal(tt.act), r.Message)
			g.Expect(r.Phase).To(Equal(tt.phase))
			g.Expect(r.Waiting).To(Equal(tt.waiting))
			g.Expect(r.Message).To(ContainSubstring("m-cp-0"))
		})
	}
}

func TestPlace(t *testing.T) {
	tests := []struct {
		name        string
		m           hook.MachineState
		patchErr    error
		wantPatched bool
		wantErr     bool
	}{
		{"a new Machine gets the hook", hook.MachineState{Machine: etcd.Machine{Name: "m"}}, nil, true, false},
		{"a Machine with the hook is left alone", hook.MachineState{Machine: etcd.Machine{Name: "m"}, Annotations: map[string]string{k3sHook.Key: "k3s"}}, nil, false, false},
		{"a deleting Machine gets no hook", hook.MachineState{Machine: etcd.Machine{Name: "m", Deleting: true}}, nil, false, false},
		{"a failed patch is an error", hook.MachineState{Machine: etcd.Machine{Name: "m"}}, errors.New("conflict"), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var set map[string]string
			patch := func(_ context.Context, machine string, s map[string]string, _ []string) error {
				g.Expect(machine).To(Equal("m"))
				set = s
				return tt.patchErr
			}
			patched, err := hook.Place(context.Background(), patch, tt.m, k3sHook)
			g.Expect(patched).To(Equal(tt.wantPatched))
			g.Expect(err != nil).To(Equal(tt.wantErr))
			if tt.wantPatched {
				g.Expect(set).To(Equal(map[string]string{k3sHook.Key: "k3s"}))
			}
		})
	}
}
