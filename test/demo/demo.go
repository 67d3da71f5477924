package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// Timeouts of the scenario's waits. They are generous for a busy 2-core machine; on an idle one
// each step takes a few seconds (the drain's 20 s re-check of evicted Pods aside).
const (
	readyTimeout    = 2 * time.Minute
	statusTimeout   = time.Minute
	deletionTimeout = 3 * time.Minute
	pollInterval    = 100 * time.Millisecond
)

// Options configure Run.
type Options struct {
	// Out receives the narration and the tables; nil means os.Stdout.
	Out io.Writer
	// Kubeconfig is where the management cluster's kubeconfig is written; empty means
	// $TMPDIR/etcd-adapter-demo/kubeconfig.
	Kubeconfig string
	// KeepRunning keeps the playground up after the scenario until ctx ends.
	KeepRunning bool
	// Root is the repository root; empty means the first directory with go.mod above the working
	// directory.
	Root string
}

// Story is what the demo observed, in order.
type Story struct {
	// Steps are the narrated step titles.
	Steps []string
	// Tables are the ControlPlaneEtcd tables printed, one per step.
	Tables []string
	// FailedMember is the kubeadm member as the status reported it after its etcd was killed.
	FailedMember v1alpha1.EtcdMemberStatus
	// Refusal is the API server's answer to the unsafe Machine deletion.
	Refusal string
	// Deletion are the milestones of the K3s Machine deletion, in the order they were seen.
	Deletion []Milestone
	// Removal is the K3s ControlPlaneEtcd's status.removal after the deletion.
	Removal *v1alpha1.MemberRemovalStatus
	// Events are the messages of the Events etcd-adapter recorded on the deleted K3s Machine.
	Events []string
	// SetupTime is how long the playground took to come up (assets built).
	SetupTime time.Duration
	// Total is how long Run took until the scenario ended.
	Total time.Duration
}

// Milestone is one observed moment of a Machine deletion.
type Milestone struct {
	// What happened; one of the Milestone* constants.
	What string
	// At is the time since the deletion was asked for.
	At time.Duration
	// Detail says what was seen.
	Detail string
}

// Milestones of a control-plane Machine deletion, in the order etcd-adapter makes them happen.
const (
	MilestoneDraining       = "drain started"
	MilestonePodEvicted     = "pod evicted"
	MilestoneWaitingForHook = "drained, waiting for the pre-terminate hook"
	MilestoneMemberRemoved  = "etcd member removed"
	MilestoneHookReleased   = "hook released"
	MilestoneMachineGone    = "Machine deleted"
)

// Run starts the playground, plays the scenario and, unless KeepRunning, stops everything.
func Run(ctx context.Context, opts Options) (_ *Story, reterr error) {
	start := time.Now()
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	if opts.Kubeconfig == "" {
		opts.Kubeconfig = filepath.Join(os.TempDir(), "etcd-adapter-demo", "kubeconfig")
	}
	if opts.Root == "" {
		root, err := repoRoot()
		if err != nil {
			return nil, err
		}
		opts.Root = root
	}
	d := &demo{out: opts.Out, story: &Story{}}
	if err := ensureAssets(ctx, opts.Root, opts.Out); err != nil {
		return nil, err
	}
	d.say("Starting the playground: a management cluster with Cluster API's Machine controller and the etcd-adapter manager, a 3-server K3s cluster and a 3-member kubeadm cluster")
	defer func() {
		d.say("Stopping the playground")
		reterr = errors.Join(reterr, d.p.close())
	}()
	if err := d.setUp(ctx, opts); err != nil {
		return d.story, err
	}
	d.story.SetupTime = time.Since(start)
	d.say("Playground up in %s. Look with kubectl meanwhile:\n\n    export KUBECONFIG=%s\n    kubectl get controlplaneetcds,machines -A\n", d.story.SetupTime.Round(100*time.Millisecond), opts.Kubeconfig)

	for _, step := range []func(context.Context) error{d.healthy, d.memberFails, d.unsafeDeletionRefused, d.memberRecovers, d.machineDeleted} {
		if err := step(ctx); err != nil {
			return d.story, err
		}
	}
	d.story.Total = time.Since(start)
	d.say("The story took %s (playground %s).", d.story.Total.Round(100*time.Millisecond), d.story.SetupTime.Round(100*time.Millisecond))
	if opts.KeepRunning {
		d.say("The playground stays up for exploration (KUBECONFIG=%s). Press Ctrl-C to stop it.", opts.Kubeconfig)
		<-ctx.Done()
	}
	return d.story, nil
}

type demo struct {
	out   io.Writer
	p     playground
	story *Story
	step  int
}

func (d *demo) setUp(ctx context.Context, opts Options) error {
	workloads := make(chan error, 1)
	go func() { workloads <- d.p.startWorkloads(ctx) }()
	err := d.p.startManagement(ctx, opts.Root)
	if err := errors.Join(err, <-workloads); err != nil {
		return err
	}
	if err := writeKubeconfig(d.p.mgmt.Config, opts.Kubeconfig); err != nil {
		return err
	}
	return d.p.register(ctx)
}

// say narrates a line. The narration never stops the demo: an error writing it is dropped here
// and in title and table.
func (d *demo) say(format string, args ...any) {
	_, _ = fmt.Fprintf(d.out, format+"\n", args...)
}

func (d *demo) title(t string) {
	d.step++
	d.story.Steps = append(d.story.Steps, t)
	_, _ = fmt.Fprintf(d.out, "\n== %d. %s\n\n", d.step, t)
}

// table prints `kubectl get controlplaneetcds -A` and keeps it in the story.
func (d *demo) table(ctx context.Context) error {
	var buf bytes.Buffer
	if err := printControlPlaneEtcds(ctx, d.p.mgmt.Config, &buf); err != nil {
		return err
	}
	d.story.Tables = append(d.story.Tables, buf.String())
	_, _ = fmt.Fprintf(d.out, "$ kubectl get controlplaneetcds -A\n%s\n", buf.String())
	return nil
}

func (d *demo) cpe(ctx context.Context, name string) (*v1alpha1.ControlPlaneEtcd, error) {
	cpe := &v1alpha1.ControlPlaneEtcd{}
	if err := d.p.mgmt.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cpe); err != nil {
		return nil, fmt.Errorf("failed to get ControlPlaneEtcd %s/%s: %w", namespace, name, err)
	}
	return cpe, nil
}

// waitFor polls cond until it holds; what names the wait in the error.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	switch {
	case err != nil && last != nil:
		return fmt.Errorf("failed waiting for %s (last error: %w): %w", what, last, err)
	case err != nil:
		return fmt.Errorf("failed waiting for %s: %w", what, err)
	}
	return nil
}

// healthy waits until both Clusters report three healthy members and every Machine is held by
// the etcd-adapter hook.
func (d *demo) healthy(ctx context.Context) error {
	d.title("Both control planes are healthy")
	d.say("etcd-adapter observes each Cluster's etcd (K3s: Node annotations and conditions; kubeadm: clientv3 through the apiserver's port-forward)\nand puts its pre-terminate hook on every control-plane Machine, so any deletion drains the Node before the member goes.")
	for name := range d.p.clusters {
		err := waitFor(ctx, readyTimeout, "ControlPlaneEtcd "+name+" to report 3 healthy members", func(ctx context.Context) (bool, error) {
			cpe, err := d.cpe(ctx, name)
			if err != nil {
				return false, err
			}
			return ptrIs(cpe.Status.HealthyVoters, 3) && conditions.IsTrue(cpe, v1alpha1.AvailableCondition), nil
		})
		if err != nil {
			return err
		}
		for _, m := range d.p.machines[name] {
			err := waitFor(ctx, readyTimeout, "Machine "+m.Name+" to carry the etcd-adapter hook", func(ctx context.Context) (bool, error) {
				got := &clusterv1.Machine{}
				if err := d.p.mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
					return false, err
				}
				return got.Annotations[v1alpha1.PreTerminateHookAnnotation] != "" && got.Status.NodeRef.Name != "", nil
			})
			if err != nil {
				return err
			}
		}
	}
	return d.table(ctx)
}

func ptrIs(p *int32, v int32) bool { return p != nil && *p == v }
