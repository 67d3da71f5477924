package rke2cp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// RKE2 Node annotations CAPRKE2 writes and reads (pkg/rke2/workload_cluster_etcd.go).
const (
	// RemoveAnnotation asks RKE2 to remove the Node's etcd member.
	RemoveAnnotation = "etcd.rke2.cattle.io/remove"
	// RemovedNodeNameAnnotation is what RKE2 writes once it removed the member.
	RemovedNodeNameAnnotation = "etcd.rke2.cattle.io/removed-node-name"
)

// DefaultInterval is how often the stand-in reconciles when Options.Interval is zero.
const DefaultInterval = 200 * time.Millisecond

// Options configures Start.
type Options struct {
	// Management is a client of the management cluster; Workload of the workload cluster.
	Management, Workload client.Client
	// Cluster is the Cluster whose control-plane Machines the stand-in handles.
	Cluster client.ObjectKey
	// Interval is the poll period (default DefaultInterval).
	Interval time.Duration
}

// Action is one thing the stand-in did, or saw while it waited, for a deleting Machine.
type Action struct {
	// At is when it happened.
	At time.Time
	// Machine is the deleting Machine's name.
	Machine string
	// What is "waiting-for-other-hooks", "remove-requested" or "released".
	What string
	// Detail says more: the other hooks waited for, or the Node's removed-node-name when remove
	// was first requested ("" when RKE2 had not removed a member of that Node yet).
	Detail string
}

// Things the stand-in records.
const (
	WaitingForOtherHooks = "waiting-for-other-hooks"
	RemoveRequested      = "remove-requested"
	Released             = "released"
)

// StandIn is a running stand-in; Stop ends it.
type StandIn struct {
	opts   Options
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	actions []Action
	seen    map[string]bool
	lastErr error
}

// Start runs the stand-in until Stop.
func Start(ctx context.Context, opts Options) (*StandIn, error) {
	if opts.Management == nil || opts.Workload == nil || opts.Cluster.Name == "" {
		return nil, errors.New("failed to start the CAPRKE2 stand-in: Management, Workload and Cluster are required")
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &StandIn{opts: opts, cancel: cancel, done: make(chan struct{}), seen: map[string]bool{}}
	go s.run(ctx)
	return s, nil
}

// Stop ends the stand-in and waits for it.
func (s *StandIn) Stop() {
	s.cancel()
	<-s.done
}

// Actions returns what the stand-in did so far, in order.
func (s *StandIn) Actions() []Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.actions)
}

// ActionsFor returns the actions about Machine name, in order.
func (s *StandIn) ActionsFor(name string) []Action {
	var out []Action
	for _, a := range s.Actions() {
		if a.Machine == name {
			out = append(out, a)
		}
	}
	return out
}

// LastError returns the last error a pass met (nil after a pass without one), for a failed wait.
func (s *StandIn) LastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

func (s *StandIn) run(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(s.opts.Interval)
	defer tick.Stop()
	for {
		err := s.reconcile(ctx)
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// record keeps the first action of each kind per Machine.
func (s *StandIn) record(machine, what, detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := machine + "/" + what
	if s.seen[key] {
		return
	}
	s.seen[key] = true
	s.actions = append(s.actions, Action{At: time.Now(), Machine: machine, What: what, Detail: detail})
}

// reconcile is one pass of reconcilePreTerminateHook.
func (s *StandIn) reconcile(ctx context.Context) error {
	machines, err := s.machines(ctx)
	if err != nil {
		return err
	}
	var deleting []*clusterv1.Machine
	for _, m := range machines {
		if !m.DeletionTimestamp.IsZero() {
			deleting = append(deleting, m)
			continue
		}
		if err := s.applyHook(ctx, m); err != nil {
			return err
		}
	}
	m := deletingMachineWithHook(deleting)
	if m == nil {
		return nil
	}
	if others := otherHooks(m); len(others) > 0 {
		s.record(m.Name, WaitingForOtherHooks, strings.Join(others, ","))
		return nil
	}
	if len(machines) > 1 && m.Status.NodeRef.IsDefined() {
		removed, err := s.requestRemoval(ctx, m)
		if err != nil || !removed {
			return err
		}
	}
	return s.release(ctx, m)
}

func (s *StandIn) machines(ctx context.Context) ([]*clusterv1.Machine, error) {
	list := &clusterv1.MachineList{}
	if err := s.opts.Management.List(ctx, list, client.InNamespace(s.opts.Cluster.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: s.opts.Cluster.Name}, client.HasLabels{clusterv1.MachineControlPlaneLabel}); err != nil {
		return nil, fmt.Errorf("failed to list the control-plane Machines of Cluster %s: %w", s.opts.Cluster, err)
	}
	out := make([]*clusterv1.Machine, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

func (s *StandIn) applyHook(ctx context.Context, m *clusterv1.Machine) error {
	if _, ok := m.Annotations[v1alpha1.RKE2HookAnnotation]; ok {
		return nil
	}
	before := m.DeepCopy()
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[v1alpha1.RKE2HookAnnotation] = ""
	if err := s.opts.Management.Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to add the rke2-cleanup hook to Machine %s: %w", m.Name, err)
	}
	return nil
}

// deletingMachineWithHook returns the deleting Machine to work on: none while a deleting
// Machine lacks the hook, else the oldest, once Cluster API waits on its hooks.
func deletingMachineWithHook(deleting []*clusterv1.Machine) *clusterv1.Machine {
	if len(deleting) == 0 {
		return nil
	}
	for _, m := range deleting {
		if _, ok := m.Annotations[v1alpha1.RKE2HookAnnotation]; !ok {
			return nil
		}
	}
	oldest := slices.MinFunc(deleting, func(a, b *clusterv1.Machine) int {
		return cmp.Or(a.DeletionTimestamp.Compare(b.DeletionTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	c := conditions.Get(oldest, clusterv1.MachineDeletingCondition)
	if c == nil || c.Status != metav1.ConditionTrue ||
		(c.Reason != clusterv1.MachineDeletingWaitingForPreTerminateHookReason && c.Reason != clusterv1.MachineDeletingWaitingForPreDrainHookReason) {
		return nil
	}
	return oldest
}

// otherHooks lists the Machine's pre-terminate hooks other than rke2-cleanup.
func otherHooks(m *clusterv1.Machine) []string {
	var out []string
	for k := range m.Annotations {
		if strings.HasPrefix(k, clusterv1.PreTerminateDeleteHookAnnotationPrefix) && k != v1alpha1.RKE2HookAnnotation {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// requestRemoval sets remove=true on the Machine's Node and reports whether RKE2 wrote a
// non-empty removed-node-name.
func (s *StandIn) requestRemoval(ctx context.Context, m *clusterv1.Machine) (bool, error) {
	node := &corev1.Node{}
	if err := s.opts.Workload.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
		// CAPRKE2 looks the Node up among the control-plane Nodes and waits when it is not there.
		return false, client.IgnoreNotFound(err)
	}
	s.record(m.Name, RemoveRequested, node.Annotations[RemovedNodeNameAnnotation])
	if node.Annotations[RemoveAnnotation] != "true" {
		before := node.DeepCopy()
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[RemoveAnnotation] = "true"
		if err := s.opts.Workload.Patch(ctx, node, client.MergeFrom(before)); err != nil {
			return false, fmt.Errorf("failed to set %s on Node %s: %w", RemoveAnnotation, node.Name, err)
		}
	}
	return node.Annotations[RemovedNodeNameAnnotation] != "", nil
}

func (s *StandIn) release(ctx context.Context, m *clusterv1.Machine) error {
	if _, ok := m.Annotations[v1alpha1.RKE2HookAnnotation]; !ok {
		return nil
	}
	before := m.DeepCopy()
	delete(m.Annotations, v1alpha1.RKE2HookAnnotation)
	m.Annotations[clusterv1.ExcludeNodeDrainingAnnotation] = "true"
	m.Annotations[clusterv1.ExcludeWaitForNodeVolumeDetachAnnotation] = "true"
	if err := s.opts.Management.Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to release the rke2-cleanup hook of Machine %s: %w", m.Name, err)
	}
	s.record(m.Name, Released, "")
	return nil
}
