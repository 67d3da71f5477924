package hookbench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

const (
	// deaths per backend in BenchmarkMemberDeathReplacement.
	deaths = 3
	// benchMemberUnhealthyTimeout and benchMemberRecoveryTime are the ControlPlaneEtcds'
	// spec.memberUnhealthyTimeout and spec.memberRecoveryTime in that benchmark (defaults 2m and
	// 1m): the figures are etcd-adapter's and Cluster API's work on top of the timeouts a user
	// configures, which are printed with them.
	benchMemberUnhealthyTimeout = 10 * time.Second
	benchMemberRecoveryTime     = 5 * time.Second
	// benchMHCTimeout is the MachineHealthCheck's timeoutSeconds (the sample's is 60 s).
	benchMHCTimeout = 1
)

// death is what one member death to its replacement took, each instant as this benchmark saw it
// (polling every 10 ms), from the member's stop.
type death struct {
	seen, conditionFalse, marked, deleting, gone, started, healthy time.Duration
}

// BenchmarkMemberDeathReplacement kills the etcd member of a control-plane Machine (its Node
// stays Ready) three times per backend and measures the whole loop of issue 32: the
// ControlPlaneEtcd status shows the member unhealthy, etcd-adapter's EtcdAdapterMemberHealthy
// turns False after memberUnhealthyTimeout, Cluster API's MachineHealthCheck marks the Machine,
// the owner (played here: delete the marked Machine, then create a replacement once it is gone,
// as KubeadmControlPlane's reconcileUnhealthyMachines and its scale-up do) deletes it,
// etcd-adapter's hook removes the member after the drain and the Machine goes, the replacement's
// member starts (a learner, added and started by the join) and the status shows every member a
// healthy voter on its Machine. Run it with `make bench-replacement`.
func BenchmarkMemberDeathReplacement(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	p := startPlatform(ctx, b)
	for _, backend := range []struct {
		name  string
		start func(context.Context, *testing.B, *platform) *cluster
	}{{"k3s", startK3s}, {"kubeadm", startKubeadm}} {
		b.Run(backend.name, func(b *testing.B) {
			c := backend.start(ctx, b, p)
			if err := c.prepareRemediation(ctx); err != nil {
				b.Fatal(err)
			}
			var all []death
			for range b.N {
				for i := range deaths {
					d, err := c.dieAndReplace(ctx)
					if err != nil {
						b.Fatalf("death %d: %v", i+1, err)
					}
					fmt.Printf("%s: death %d: status unhealthy %v, condition False %v, MachineHealthCheck mark %v, owner's Delete %v, Machine gone (member removed) %v, replacement member started %v, all members healthy %v\n",
						backend.name, i+1, d.seen, d.conditionFalse, d.marked, d.deleting, d.gone, d.started, d.healthy)
					all = append(all, d)
				}
			}
			reportDeaths(b, backend.name, all)
		})
	}
}

func reportDeaths(b *testing.B, backend string, all []death) {
	pick := func(f func(death) time.Duration) time.Duration {
		ds := make([]time.Duration, 0, len(all))
		for _, d := range all {
			ds = append(ds, f(d))
		}
		median, _, _ := stats(ds)
		return median
	}
	deleting := pick(func(d death) time.Duration { return d.deleting })
	started := pick(func(d death) time.Duration { return d.started })
	healthy := pick(func(d death) time.Duration { return d.healthy })
	b.ReportMetric(ms(deleting), "death-to-delete-median-ms")
	b.ReportMetric(ms(started), "death-to-replacement-started-median-ms")
	b.ReportMetric(ms(healthy), "death-to-healthy-median-ms")
	fmt.Printf("%s: member death → replacement, %d deaths (memberUnhealthyTimeout %v, MachineHealthCheck timeoutSeconds %d, observationInterval %v), medians: status unhealthy %v, condition False %v, marked %v, owner's Delete %v, Machine gone %v, replacement member started %v, all healthy %v\n",
		backend, len(all), benchMemberUnhealthyTimeout, benchMHCTimeout, observationInterval,
		pick(func(d death) time.Duration { return d.seen }), pick(func(d death) time.Duration { return d.conditionFalse }),
		pick(func(d death) time.Duration { return d.marked }), deleting, pick(func(d death) time.Duration { return d.gone }), started, healthy)
}

// prepareRemediation sets the ControlPlaneEtcd's member timeouts and creates a
// MachineHealthCheck like config/samples/machinehealthcheck-etcd-member.yaml for the Cluster.
func (c *cluster) prepareRemediation(ctx context.Context) error {
	cpe, err := c.status(ctx)
	if err != nil {
		return err
	}
	before := cpe.DeepCopy()
	cpe.Spec.MemberUnhealthyTimeout = &metav1.Duration{Duration: benchMemberUnhealthyTimeout}
	cpe.Spec.MemberRecoveryTime = &metav1.Duration{Duration: benchMemberRecoveryTime}
	if err := c.p.c.Patch(ctx, cpe, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to set the member timeouts: %w", err)
	}
	mhc := &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.cluster.Namespace, Name: c.cluster.Name + "-etcd-member"},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: c.cluster.Name,
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}},
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyMachineConditions: []clusterv1.UnhealthyMachineCondition{{
				Type: v1alpha1.MemberHealthyMachineCondition, Status: metav1.ConditionFalse, TimeoutSeconds: ptr.To[int32](benchMHCTimeout),
			}}},
			Remediation: clusterv1.MachineHealthCheckRemediation{TriggerIf: clusterv1.MachineHealthCheckRemediationTriggerIf{
				UnhealthyLessThanOrEqualTo: ptr.To(intstr.FromInt32(1)),
			}},
		},
	}
	if err := c.p.c.Create(ctx, mhc); err != nil {
		return fmt.Errorf("failed to create the MachineHealthCheck: %w", err)
	}
	return poll(ctx, stepTimeout, "every Machine's EtcdAdapterMemberHealthy True", func() (bool, error) {
		for _, m := range c.machines {
			got := &clusterv1.Machine{}
			if err := c.p.c.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
				return false, err
			}
			if !conditions.IsTrue(got, v1alpha1.MemberHealthyMachineCondition) {
				return false, nil
			}
		}
		return true, nil
	})
}

// dieAndReplace kills the member of the second-oldest Node and plays the owner until its
// replacement is a healthy voter.
func (c *cluster) dieAndReplace(ctx context.Context) (death, error) {
	node := c.nodes[1]
	m := c.machines[node]
	name := c.memberOf(node)
	start := time.Now()
	if err := c.stopMember(ctx, node, name); err != nil {
		return death{}, err
	}
	var d death
	err := poll(ctx, stepTimeout, "Machine "+m.Name+" marked by the MachineHealthCheck", func() (bool, error) {
		got := &clusterv1.Machine{}
		if err := c.p.c.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
			return false, err
		}
		if d.seen == 0 {
			cpe, err := c.status(ctx)
			if err != nil {
				return false, err
			}
			for _, mem := range cpe.Status.Members {
				if mem.NodeName == node && mem.Health != v1alpha1.MemberHealthy {
					d.seen = time.Since(start)
				}
			}
		}
		if d.conditionFalse == 0 && conditions.IsFalse(got, v1alpha1.MemberHealthyMachineCondition) {
			d.conditionFalse = time.Since(start)
		}
		marked := conditions.IsFalse(got, clusterv1.MachineHealthCheckSucceededCondition) && conditions.IsFalse(got, clusterv1.MachineOwnerRemediatedCondition)
		if marked {
			d.marked = time.Since(start)
		}
		return marked, nil
	})
	if err != nil {
		return death{}, err
	}
	if err := c.p.c.Delete(ctx, m); err != nil {
		return death{}, fmt.Errorf("failed to delete Machine %s: %w", m.Name, err)
	}
	d.deleting = time.Since(start)
	if err := poll(ctx, stepTimeout, "Machine "+m.Name+" gone", func() (bool, error) {
		err := c.p.c.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}); err != nil {
		return death{}, err
	}
	d.gone = time.Since(start)
	delete(c.machines, node)
	c.nodes = slices.DeleteFunc(c.nodes, func(n string) bool { return n == node })
	if err := c.afterGone(node); err != nil {
		return death{}, err
	}

	replacement := fmt.Sprintf("%s-%d", c.cluster.Name, c.seq)
	c.seq++
	rm, err := c.p.createMachine(ctx, c.cluster, replacement)
	if err != nil {
		return death{}, err
	}
	if err := c.join(ctx, replacement); err != nil {
		return death{}, fmt.Errorf("failed to join a member on Node %s: %w", replacement, err)
	}
	d.started = time.Since(start)
	if err := c.p.bindNode(ctx, rm, c.cluster, c.wl, replacement); err != nil {
		return death{}, err
	}
	c.nodes = append(c.nodes, replacement)
	c.machines[replacement] = rm
	if err := c.waitSteady(ctx); err != nil {
		return death{}, err
	}
	d.healthy = time.Since(start)
	// Not measured: etcd's strict reconfiguration check would delay the next removal while the
	// new member has been connected for less than its HealthInterval (see replace).
	time.Sleep(etcdHealthInterval)
	return d, nil
}
