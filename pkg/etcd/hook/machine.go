package hook

import (
	"context"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Hook is a pre-terminate hook annotation: Key starts with PreTerminateHookPrefix, Value names
// its owner.
type Hook struct {
	Key   string
	Value string
}

// MachineState is what the flow reads of one control-plane Machine, as plain data.
type MachineState struct {
	// Machine is its decision inputs (name, Node, addresses, deletion).
	etcd.Machine
	// Annotations are its metadata.annotations.
	Annotations map[string]string
	// DeletingReason is the reason of its Deleting condition (Cluster API v1beta2 conditions);
	// empty when it has none.
	DeletingReason string
}

// PatchFunc patches the Machine's annotations: it sets every key of set and removes every key
// of remove, in one patch, and fails when the patch does. The caller writes it with its own
// client (a merge patch of metadata.annotations).
type PatchFunc func(ctx context.Context, machine string, set map[string]string, remove []string) error

// NeedsHook reports whether the hook should be placed on the Machine: it is not there and the
// Machine is not deleting (Cluster API ignores a hook added after the deletion started, and its
// drain may be over already).
func NeedsHook(m MachineState, h Hook) bool {
	_, ok := m.Annotations[h.Key]
	return !ok && !m.Deleting
}

// Place puts the hook on the Machine when NeedsHook says so, and reports whether it patched.
// Place it when the Machine is created (or on every reconcile of one without it), not just
// before the provider's own deletes, so a kubectl delete or a remediation drains first too.
func Place(ctx context.Context, patch PatchFunc, m MachineState, h Hook) (bool, error) {
	if !NeedsHook(m, h) {
		return false, nil
	}
	if err := patch(ctx, m.Name, map[string]string{h.Key: h.Value}, nil); err != nil {
		return false, err
	}
	return true, nil
}
